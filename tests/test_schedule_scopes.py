"""The unit xdist hands a worker in a scenario run: a module's checks of one
model (harness/schedule/scopes.py), so that a family on many models spreads
over the workers."""
from harness.schedule.scopes import model_scope

MODELS = ("tiny-gemma4", "tiny-gemma4-conformer", "tiny-qwen2-audio", "gemma-4-e2b")


def test_a_modules_checks_of_one_model_are_one_unit():
    assert model_scope("scenarios/test_ragged_audio.py::test_batch_invariance[clip0-ragged-tiny-qwen2-audio]",
                       MODELS) == "scenarios/test_ragged_audio.py::tiny-qwen2-audio"
    assert model_scope("scenarios/test_ragged_audio.py::test_one_pass[ragged-tiny-qwen2-audio]", MODELS) == \
        model_scope("scenarios/test_ragged_audio.py::test_edge_input[tiny-qwen2-audio-0.05s]", MODELS)


def test_the_longest_name_that_fits_wins():
    assert model_scope("scenarios/test_ragged_audio.py::test_edge_input[tiny-gemma4-conformer-stereo]",
                       MODELS).endswith("::tiny-gemma4-conformer")
    assert model_scope("scenarios/test_vision_lora.py::test_probe[tp1-tiny-gemma4-vision.q]",
                       MODELS).endswith("::tiny-gemma4")


def test_a_check_of_no_model_stays_with_its_module():
    assert model_scope("scenarios/test_x.py::test_plain", MODELS) == "scenarios/test_x.py"
    assert model_scope("scenarios/test_x.py::test_y[other]", MODELS) == "scenarios/test_x.py"
