"""The model matrix: what each tier lists, and clear errors for bad entries."""
import pytest

from harness.models import ModelMatrixError, load_matrix, models_for
from harness.plugins.matrix import _selected

GOOD = """
[[cpu]]
name = "a"
model = "tiny:gemma4"
modalities = ["text", "audio"]
[cpu.engine_args]
dtype = "bfloat16"
"""


def test_shipped_matrix_lists_the_tiers():
    m = load_matrix()
    assert {"gemma4", "gemma3n", "gemma4-awq", "qwen2-audio"} <= {e.tiny_arch for e in m["cpu"]}
    gpu = {e.model for e in m["gpu"]}
    assert {"google/gemma-3n-E2B-it", "google/gemma-4-E2B-it"} <= gpu
    assert any("AWQ" in e.model and "26B" in e.model for e in m["gpu"])
    assert all(e.engine_args for e in m["gpu"])


def test_modality_filter(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(GOOD)
    assert [e.name for e in models_for("cpu", p, "audio")] == ["a"]
    assert models_for("cpu", p, "video") == []


@pytest.mark.parametrize("text, fragment", [
    (GOOD.replace('name = "a"', 'name = "a"\nflavour = 1'), "unknown field(s) ['flavour']"),
    (GOOD.replace('model = "tiny:gemma4"\n', ""), "missing required field(s) ['model']"),
    (GOOD.replace('["text", "audio"]', '["smell"]'), "modalities must be"),
    (GOOD.replace("[[cpu]]", "[[tpu]]").replace("[cpu.", "[tpu."), "unknown tier(s) ['tpu']"),
    (GOOD + GOOD, "duplicate name"),
    ("[[cpu]\n", "not valid TOML"),
    (GOOD.replace('name = "a"', 'name = "a"\ncard = "l4-2g"'), "card: unknown card profile 'l4-2g'"),
    (GOOD.replace('name = "a"', 'name = "a"\ncard = 22'), "card: "),
    (GOOD.replace('name = "a"', 'name = "a"\nbuild = 1'), "build must be a table"),
    (GOOD.replace('name = "a"', 'name = "a"\nzoo = true'), "zoo must be one of ['sample', 'full'], got True"),
    (GOOD.replace('name = "a"', 'name = "a"\ntp_sizes = [1, 2]'), "tp_sizes must be a list of TP sizes above 1"),
    (GOOD.replace('name = "a"', 'name = "a"\ntp_sizes = 2'), "tp_sizes must be a list of TP sizes above 1"),
    (GOOD.replace('name = "a"', 'name = "a"\nlora = { adapters = ["x"] }'), "lora must be a table with only"),
    (GOOD.replace('name = "a"', 'name = "a"\nlora = { published = "org/x" }'), "lora must be a table with only"),
    (GOOD.replace('name = "a"', 'name = "a"\nbuild = { audio_config = {} }').replace("tiny:gemma4", "org/m"),
     "only a tiny model has one"),
])
def test_bad_entries_are_clear_errors(tmp_path, text, fragment):
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(ModelMatrixError) as e:
        load_matrix(p)
    assert fragment in str(e.value)


def test_unknown_tier_and_missing_file(tmp_path):
    with pytest.raises(ModelMatrixError, match="unknown tier"):
        models_for("tpu")
    with pytest.raises(ModelMatrixError, match="not found"):
        load_matrix(tmp_path / "nope.toml")


def test_card_and_build_fields(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(GOOD.replace('name = "a"', 'name = "a"\ncard = "L4-22G"\n'
                              'build = { audio_config = { num_hidden_layers = 1 } }'))
    (entry,) = models_for("cpu", p)
    assert entry.card == "L4-22G" and entry.build == {"audio_config": {"num_hidden_layers": 1}}
    assert {e.name: e.card for e in models_for("cpu")}["tiny-gemma4"] == "l4-22g"


def test_quantized_entries_are_the_quantized_tiny_builds():
    assert {e.name for e in models_for("cpu") if e.quantized} == {"tiny-gemma4-awq"}
    assert not any(e.quantized for e in models_for("gpu"))  # hub checkpoints are not dequantized here


def test_lora_entries_run_the_lora_family(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(GOOD.replace('name = "a"', 'name = "a"\nlora = { published = ["org/x"], tp_sizes = [1] }'))
    [entry] = load_matrix(path)["cpu"]
    assert entry.lora == {"published": ["org/x"], "tp_sizes": [1]}
    shipped = {e.name for e in models_for("cpu") if e.lora is not None}
    assert shipped == {"tiny-gemma4", "tiny-gemma4-heads4", "tiny-gemma3n"}
    assert [e.name for e in models_for("cpu") if e.optional] == ["tiny-gemma4-heads4"]


def test_make_run_samples_the_zoo_and_full_or_a_name_runs_the_rest():
    entries = models_for("cpu")
    sample = {e.name for e in _selected(entries, [], "cpu", "sample")}
    full = {e.name for e in _selected(entries, [], "cpu", "full")}
    zoo = {e.name for e in entries if e.zoo}
    assert {"tiny-qwen2-audio", "tiny-qwen2-5-vl"} <= sample and "tiny-voxtral" not in sample
    assert full - sample == {e.name for e in entries if e.zoo == "full"} and len(zoo) >= 12
    assert {"tiny-gemma4", "tiny-gemma3n"} <= sample  # outside the zoo: in every run
    assert [e.name for e in _selected(entries, ["tiny-voxtral"], "cpu", "sample")] == ["tiny-voxtral"]
    assert "tiny-gemma4-heads4" not in full  # optional: by name only


def test_the_vision_zoo_runs_tp_invariance_where_its_heads_split():
    tp = {e.name: e.tp_sizes for e in models_for("cpu") if e.tp_sizes}
    assert len(tp) >= 5 and all(sizes == (2,) for sizes in tp.values())
    assert {"tiny-qwen2-5-vl", "tiny-qwen3-vl"} <= set(tp) and "tiny-gemma4" not in tp  # its TP checks: LoRA's
