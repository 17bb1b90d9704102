"""The vision-LoRA family's check logic on crafted outputs and events: each
check fails on the fault it is for, with the cause a report groups by."""
import pytest

from harness.checks.noise import NoiseProfile
from harness.verdicts import Cause, CheckFailure, Unsupported
from harness.engines.outcomes import Completion, Rejected
from harness.engines.parallel import NotHostable, heads_divide, placement
from harness.lora import effects
from harness.memory.card.chunks import check_passes_within_stated_chunk
from harness.models import ModelEntry
from tests.crafted_runs import PROFILES, crafted_profiles  # noqa: F401 (a fixture)
from tests.crafted_runs import check as _check, crafted_run as _run

pytestmark = pytest.mark.usefixtures("crafted_profiles")


def out(*tokens, lp=-0.1):
    return Completion(text="", token_ids=list(tokens), logprobs=[{t: lp} for t in tokens],
                      finish_reason="length", cached_tokens=0)


# --- takes effect, probes, premise ---------------------------------------------

EXACT = NoiseProfile("cpu", "cpu:_C", "tiny", "bfloat16", "same-stack", 0.0, 0.0, 0, measured="crafted")


def test_a_probe_that_changes_nothing_names_its_group():
    with pytest.raises(CheckFailure) as e:
        effects.check_takes_effect(out(1, 2, 3), out(1, 2, 3), EXACT, adapter="probe-vision.gate",
                                   group="vision.gate", input_label="image")
    assert e.value.cause.kind == Cause.NO_EFFECT and e.value.cause.detail == "vision.gate"
    assert "the vision.gate group changed nothing for image" in e.value.message


def test_an_adapter_that_changes_the_output_takes_effect():
    evidence = effects.check_takes_effect(out(1, 9, 9), out(1, 2, 3), EXACT, adapter="tower", group=None,
                                          input_label="image")
    assert "diverged at position 1" in evidence["effect"]


def test_logprobs_moved_beyond_noise_count_as_an_effect():
    evidence = effects.check_takes_effect(out(1, 2, lp=-0.1001), out(1, 2, lp=-0.1), EXACT, adapter="lm",
                                          group=None, input_label="text")
    assert "logprob" in evidence["effect"]


def test_an_adapter_the_engine_says_it_does_not_support_gets_its_own_verdict_with_the_message():
    with pytest.raises(Unsupported) as e:
        effects.check_takes_effect(Rejected(None, "ValueError: target modules not supported"), out(1), EXACT,
                                   adapter="probe-audio.q", group="audio.q", input_label="audio")
    assert str(e.value.cause) == ("not-supported: the engine refused adapter probe-audio.q (targets audio.q): "
                                  "ValueError: target modules not supported")


def test_a_refusal_in_other_words_is_a_failure_with_them():
    """The offline engine's Rejected(status=None) is not the engine saying it
    does not support something: it fails, with the engine's words."""
    with pytest.raises(CheckFailure) as e:
        effects.check_takes_effect(Rejected(None, "ValueError: LoRA rank 8 is greater than max_lora_rank 4"),
                                   out(1), EXACT, adapter="tower", group=None, input_label="image")
    assert e.value.cause == Cause.HTTP_4XX and "greater than max_lora_rank" in e.value.message


def test_a_5xx_is_a_failure_not_a_refusal():
    with pytest.raises(CheckFailure) as e:
        effects.check_takes_effect(Rejected(500, "Internal Server Error"), out(1), EXACT, adapter="tower",
                                   group=None, input_label="image")
    assert e.value.cause == Cause.HTTP_5XX


def test_hf_premise_fails_when_the_adapter_does_not_move_hf():
    with pytest.raises(CheckFailure) as e:
        effects.check_premise(out(4, 5), out(4, 5), "image@probe-vision.k", EXACT)
    assert e.value.cause == Cause.PREMISE
    assert "would prove nothing" in e.value.message
    assert effects.check_premise(out(4, 6), out(4, 5), "x", EXACT)["hf_premise"].startswith("HF + peft output changed")


def test_an_adapter_that_reaches_text_it_cannot_see_fails():
    with pytest.raises(CheckFailure) as e:
        effects.untouched(out(1, 7), out(1, 2), EXACT, adapter="tower", input_label="text")
    assert e.value.cause == Cause.MISMATCH and "none of its modules can reach" in e.value.message


# --- engine refusal of LoRA at start-up ---------------------------------------

def test_an_engine_that_serves_no_lora_is_unsupported_with_its_words():
    failure = CheckFailure(Cause.STARTUP_FAILED, "offline engine for tiny-gemma3n did not start: engine "
                           "died. ValueError: Gemma3nForConditionalGeneration does not support LoRA yet.")
    with pytest.raises(Unsupported) as e:
        effects.raise_if_refused(failure)
    assert e.value.message == "Gemma3nForConditionalGeneration does not support LoRA yet."


def test_any_other_start_up_failure_stays_a_failure():
    failure = CheckFailure(Cause.OOM, "offline engine did not start: out of memory")
    with pytest.raises(CheckFailure) as e:
        effects.raise_if_refused(failure)
    assert e.value is failure
    effects.raise_if_refused(None)


# --- mixed batches: one step, rows as solo -------------------------------------

def test_one_step_must_hold_every_prompt_under_its_adapter():
    rows = [("0", None), ("1", "tower"), ("2", "lm")]
    ok_step = {"event": "step", "tokens": {"a": 40, "b": 40, "c": 40}, "loras": {"a": None, "b": "tower", "c": "lm"}}
    _check().adapters_in_one_step(_run(rows, [out(1)] * 3, [ok_step]))
    split = [{"event": "step", "tokens": {"a": 40}, "loras": {"a": None}},
             {"event": "step", "tokens": {"b": 40, "c": 40}, "loras": {"b": "tower", "c": "lm"}}]
    with pytest.raises(CheckFailure) as e:
        _check().adapters_in_one_step(_run(rows, [out(1)] * 3, split))
    assert e.value.cause == Cause.PREMISE and "[['base'], ['lm', 'tower']]" in e.value.message
    wrong = [{**ok_step, "loras": {"a": "tower", "b": "tower", "c": "lm"}}]
    with pytest.raises(CheckFailure):
        _check().adapters_in_one_step(_run(rows, [out(1)] * 3, wrong))


def test_a_base_row_that_ran_under_an_adapter_is_named():
    rows = [("0-image@base", None), ("1-image@tower", "tower")]
    batch = _run(rows, [out(5, 6), out(5, 6)], [])
    solo = _run(rows, [out(1, 2), out(5, 6)], [], how="each_alone")
    crossed = _run([("0-image@base~base", None), ("0-image@base~tower", "tower")],
                   [out(1, 2), out(5, 6)], [], how="each_alone")
    with pytest.raises(CheckFailure) as e:
        _check().rows_as_solo(batch, solo, crossed)
    assert e.value.cause == Cause.MISMATCH
    assert "input 0-image@base" in e.value.message and "it equals its input under tower" in e.value.message
    assert e.value.evidence["equals"] == "its input under tower"
    check = _check()
    check.rows_as_solo(solo, solo, crossed)
    rejected = check.record.evidence["comparisons"]["0-image@base"]["rejected"]
    assert set(rejected) == {"1-image@tower's solo answer", "its input under tower"}


def test_a_row_that_cannot_be_told_from_its_input_under_another_adapter_fails_the_premise():
    """An adapter that changes nothing for the row's input: the check would
    pass a base row that ran under it."""
    rows = [("0-image@base", None)]
    solo = _run(rows, [out(1, 2)], [], how="each_alone")
    crossed = _run([("0-image@base~tower", "tower")], [out(1, 2)], [], how="each_alone")
    with pytest.raises(CheckFailure) as e:
        _check().rows_as_solo(solo, solo, crossed)
    assert e.value.cause == Cause.PREMISE and "its input under tower" in e.value.message


# --- chunking under tower LoRA -------------------------------------------------

def _pass(items, patches=256):
    return {"event": "vision_chunk", "pid": 1, "modality": "image", "items": items, "patches": patches}


def test_passes_over_the_stated_chunk_fail_over_budget():
    stated = lambda patches, free, total: 2  # noqa: E731
    events = [{"event": "encoder", "pid": 1, "modality": "image"}, _pass(24)]
    with pytest.raises(CheckFailure) as e:
        check_passes_within_stated_chunk(events, 300 << 20, 600 << 20, stated, "the batch")
    assert e.value.cause.kind == Cause.OVER_BUDGET
    assert "held 24 items" in e.value.message and "allows 2" in e.value.message and "0 memory queries" in e.value.message
    ok = [{"event": "encoder", "pid": 1, "modality": "image"}, _pass(2), _pass(2)]
    assert check_passes_within_stated_chunk(ok, 300 << 20, 600 << 20, stated, "b")["passes"][0]["allowed"] == 2


# --- TP placement --------------------------------------------------------------

def test_every_cpu_rank_computes_on_one_core_sharing_cores_when_short():
    """One thread per rank whatever the machine: the thread count changes
    the answers (harness.engines.parallel)."""
    assert placement(1, "cpu", cores=[0, 1]) == {"VLLM_CPU_OMP_THREADS_BIND": "0"}
    assert placement(1, "cpu", cores=[4, 5, 6, 7]) == {"VLLM_CPU_OMP_THREADS_BIND": "4"}
    assert placement(2, "cpu", cores=[0, 1]) == {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    assert placement(2, "cpu", cores=[0, 1, 2, 3]) == {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    assert placement(4, "cpu", cores=[0, 1]) == {"VLLM_CPU_OMP_THREADS_BIND": "0|1|0|1"}
    assert placement(1, "gpu") == {}


def test_gpu_tp_needs_as_many_gpus():
    with pytest.raises(NotHostable, match="TP 4 needs 4 GPUs; this machine has 2"):
        placement(4, "gpu", gpus=2)


def test_heads_must_split_over_the_ranks(tmp_path):
    (tmp_path / "config.json").write_text('{"text_config": {"num_attention_heads": 2}}')
    heads_divide(tmp_path, 2)
    with pytest.raises(NotHostable, match="divisible by 4; this build has 2"):
        heads_divide(tmp_path, 4)


def test_tp_sizes_are_held_to_the_tp_profile_and_every_rank_must_step():
    profile = next(p for p in PROFILES if p.path == "tp")
    bound = profile.logprob_tolerance(-1.6)
    rows = [("0", None)]
    tp1 = _run(rows, [out(1, 2, lp=-1.6)], [])
    steps = [{"event": "step", "pid": p, "tokens": {"a": 9}} for p in (11, 12)]
    _check().across_tp(_run(rows, [out(1, 2, lp=-1.6 - bound * 0.9)], steps), tp1, 2)
    with pytest.raises(CheckFailure) as e:
        _check().across_tp(_run(rows, [out(1, 2, lp=-1.6 - bound * 3)], steps), tp1, 2)
    assert e.value.cause == Cause.MISMATCH and "in TP 2" in e.value.message and "in TP 1" in e.value.message
    _check().every_rank_stepped(_run(rows, [out(1)], steps), 2)
    with pytest.raises(CheckFailure) as e:
        _check().every_rank_stepped(_run(rows, [out(1)], steps[:1]), 2)
    assert e.value.cause == Cause.PREMISE and "1 worker process" in e.value.message


def test_agreement_needs_a_comparator_that_sees_the_adapter():
    """Power of the HF agreement: HF's answer without the adapter, in place
    of its answer with it, must be rejected, else the check could not tell
    an engine that dropped the adapter."""
    hf = _run([("image@tower", "tower")], [out(7, 2)], [], how="hf-peft")
    engine = _run([("image@tower", "tower")], [out(7, 2)], [], how="each_alone")
    with pytest.raises(CheckFailure) as e:
        _check().agrees(engine, hf, wrong={"image@tower": {"HF's answer without the adapter": out(7, 2)}})
    assert e.value.cause == Cause.PREMISE and "HF's answer without the adapter" in e.value.message
    _check().agrees(engine, hf, wrong={"image@tower": {"HF's answer without the adapter": out(9, 9)}})


def test_a_refusal_where_the_matrix_says_lora_is_served_is_a_regression():
    rows = [("image@base", None), ("image@probe", "probe")]
    refusal = _run(rows, [out(1), Rejected(400, "LoRA is not supported for this module")], [], how="each_alone")
    with pytest.raises(CheckFailure) as e:
        _check().takes_effect(refusal, adapter="probe")
    assert str(e.value.cause).startswith("not-supported") and "a regression" in e.value.message
    unknown = ModelEntry(tier="cpu", name="tiny", model="tiny:gemma4", modalities=frozenset({"image"}),
                         engine_args={"dtype": "bfloat16"}, lora={})
    with pytest.raises(Unsupported):
        _check().takes_effect(_run(rows, refusal.outcomes, [], how="each_alone", entry=unknown), adapter="probe")
