"""Mutation tests: every check is shown to fail. A fault switched on inside
the real CPU engine (`--inject-faults`, harness tests only) must make exactly
the check that targets it fail, with the right cause.

The leaks are subtle: sized in standard deviations of the embedding they
perturb, at LEAK_SCALE, a few times the smallest scale at which
benchmarks/measure_sensitivity.py measured every affected item caught (the
old fault was a leak 250 times the embeddings' size).

Engine starts dominate the cost (about 40 s each), so faults that act on
different engines and different checks share one run: the padding leak acts
on the ragged batch, the media cross on the equal batch, the cache fault on
the reference engine, the 8 kHz refusal on the server; each test reads only
the checks its fault targets.
"""
import pytest

from tests.scenario_runs import run_scenarios

pytestmark = [pytest.mark.engine, pytest.mark.mutation]
MODEL = "tiny-gemma4"
# benchmarks/measure_sensitivity.py on this tier: every clip, image and frame
# the leaks reach is caught from SENSITIVITY_SCALE; the tests run at 3 times it.
SENSITIVITY_SCALE = 3e-5
LEAK_SCALE = 3 * SENSITIVITY_SCALE


# Each fault run: the faults switched on, the checks it selects, the scenario module.
RUNS = {
    "leak_cross_cache_8khz": ("padding-leak,media-cross,reference-cache,reject-8khz",
                              "batch_invariance or concurrent_matches_solo and normal or 8kHz",
                              "test_ragged_audio.py"),
    "single_steps": ("single-request-steps", "one_pass and ragged or concurrent_matches_solo and normal",
                     "test_ragged_audio.py"),
    "ragged_raise": ("raise-ragged-audio", "ragged and (one_pass or alive_after_batch)", "test_ragged_audio.py"),
    "encoder_faults": ("chunk-from-total,vision-chunk-leak",
                       "chunk_from_free or chunk_boundary_invariance and (chunk1 or chunk3) "
                       "or ragged_video_invariance or batch_invariance_on_card", "test_encoder_memory.py"),
    "lora_faults": ("lora-ignore-vision-mlp,base-under-adapter", "tp1 and (probe and vision or mixed_batch)",
                    "test_vision_lora.py"),
}


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    """fault_run(name): the records of the scenario run RUNS names, run on first use."""
    done = {}

    def records(name: str) -> dict:
        if name not in done:
            faults, selection, module = RUNS[name]
            try:
                done[name], _ = run_scenarios(module, tmp_path_factory.mktemp(name), "--model", MODEL,
                                              "-k", selection, f"--inject-faults={faults}",
                                              f"--fault-scale={LEAK_SCALE}")
            except AssertionError as no_results:  # the run's other tests fail the same, without a rerun
                done[name] = no_results
        if isinstance(done[name], AssertionError):
            raise done[name]
        return done[name]
    return records


def assert_failed(rec, cause: str, says: str) -> None:
    assert (rec.verdict, rec.cause) == ("fail", cause), rec.message
    assert says in rec.message


def test_mutation_padding_leak_fails_batch_invariance_with_mismatch(fault_run):
    """The fault perturbs every clip shorter than the longest in its encoder
    call by LEAK_SCALE of its embedding's std: all three fail with
    mismatch, the longest (untouched) still passes."""
    records = fault_run("leak_cross_cache_8khz")
    verdicts = {k: (r.verdict, r.cause) for k, r in records.items()
                if k.startswith("test_batch_invariance[") and f"ragged-{MODEL}" in k}
    assert verdicts == {f"test_batch_invariance[clip{i}-ragged-{MODEL}]": ("fail", "mismatch")
                        for i in range(3)} | {f"test_batch_invariance[clip3-ragged-{MODEL}]": ("pass", None)}


def test_mutation_one_clips_media_in_another_rows_answer_is_named(fault_run):
    """The equal batch's last clip gets the first clip's embedding: it fails
    with mismatch, named as the first clip's answer; the others pass (and
    their records hold the answers their comparator rejected)."""
    records = fault_run("leak_cross_cache_8khz")
    equal = {k: r for k, r in records.items() if k.startswith("test_batch_invariance[") and f"equal-{MODEL}" in k}
    crossed = equal.pop(f"test_batch_invariance[clip3-equal-{MODEL}]")
    assert_failed(crossed, "mismatch", "it equals clip0:3s's solo answer")
    assert {r.verdict for r in equal.values()} == {"pass"}
    for r in equal.values():
        [(label, comparison)] = r.evidence["comparisons"].items()
        assert len(comparison["rejected"]) == 3, comparison


def test_mutation_single_request_steps_fails_the_one_pass_and_served_together_premises(fault_run):
    records = fault_run("single_steps")
    assert_failed(records[f"test_one_pass[ragged-{MODEL}]"], "premise", "not scheduled in one step")
    assert_failed(records[f"test_concurrent_matches_solo[normal-{MODEL}]"], "premise", "not served together")


def test_mutation_raise_in_the_audio_encoder_is_a_crash_naming_the_exception(fault_run):
    records = fault_run("ragged_raise")
    for check in ("test_one_pass", "test_alive_after_batch"):
        rec = records[f"{check}[ragged-{MODEL}]"]
        assert rec.verdict == "fail", rec
        # vLLM's worker wraps it: "RuntimeError: Worker failed with error '…'"
        assert rec.cause.startswith("python-exception: RuntimeError") and \
            "mmharness fault: ragged audio batch" in rec.cause, rec.cause


def test_mutation_reference_from_the_cache_fails_isolation(fault_run):
    records = fault_run("leak_cross_cache_8khz")
    assert_failed(records[f"test_concurrent_matches_solo[normal-{MODEL}]"], "premise", "not isolated")


def test_mutation_8khz_refused_fails_the_edge_check(fault_run):
    records = fault_run("leak_cross_cache_8khz")
    assert_failed(records[f"test_edge_input[{MODEL}-8kHz]"], "http-4xx", "a valid input refused")


def test_mutation_total_passed_as_free_fails_the_call_site_check(fault_run):
    records = fault_run("encoder_faults")
    assert_failed(records[f"test_chunk_from_free_memory[{MODEL}]"],
                  "over-budget: chunk sized from total memory, not free", "passed the total")


def test_mutation_vision_chunk_leak_fails_every_vision_invariance(fault_run):
    """Items after a pass's first are perturbed by LEAK_SCALE of their
    embedding's std, on every engine. Chunks of
    three put single-image prompts behind another image: they fail. Chunks
    of one leave every item first in its pass, so only prompts whose
    images share a pass on the reference engine (several images) differ.
    The videos' frames are cut into other passes batched on the card than
    alone."""
    records = fault_run("encoder_faults")
    verdicts = {k: (r.verdict, r.cause) for k, r in records.items()
                if k.startswith(("test_chunk_boundary_invariance", "test_ragged_video_invariance",
                                 "test_batch_invariance_on_card"))}
    assert verdicts == {f"test_batch_invariance_on_card[{MODEL}]": ("fail", "mismatch"),
                        f"test_chunk_boundary_invariance[chunk1-{MODEL}]": ("fail", "mismatch"),
                        f"test_chunk_boundary_invariance[chunk3-{MODEL}]": ("fail", "mismatch"),
                        f"test_ragged_video_invariance[{MODEL}]": ("fail", "mismatch")}
    assert "single-" in records[f"test_chunk_boundary_invariance[chunk3-{MODEL}]"].message
    assert "many-" in records[f"test_chunk_boundary_invariance[chunk1-{MODEL}]"].message


def test_mutation_ignored_vision_mlp_lora_is_named_by_its_probes(fault_run):
    """The vision tower's MLP layers are silently left without LoRA inside
    the engine: the probes on those three families fail naming each, and the
    attention probes (untouched by the fault) still pass."""
    records = fault_run("lora_faults")
    for fam in ("vision.gate", "vision.up", "vision.down"):
        rec = records[f"test_probe[tp1-{MODEL}-{fam}]"]
        assert_failed(rec, f"no-effect: {fam}", f"the {fam} family changed nothing for image")
        assert rec.evidence["hf_premise"].startswith("HF + peft output changed")
    assert {records[f"test_probe[tp1-{MODEL}-vision.{p}]"].verdict for p in "qkvo"} == {"pass"}


def test_mutation_a_base_row_run_under_an_adapter_is_named(fault_run):
    """Base rows of a mixed batch run under the step's first adapter: each
    order's base rows fail with mismatch, named as their input under that
    adapter; the adapter rows still pass."""
    records = fault_run("lora_faults")
    mixed = {k: r for k, r in records.items() if k.startswith("test_mixed_batch[")}
    assert len(mixed) == 3, sorted(mixed)
    for key, first in ((f"test_mixed_batch[tp1-{MODEL}-base-tower-lm]", "tower"),
                       (f"test_mixed_batch[tp1-{MODEL}-tower-base-lm-base]", "tower"),
                       (f"test_mixed_batch[tp1-{MODEL}-lm-tower-tower-base-lm]", "lm")):
        assert_failed(mixed[key], "mismatch", f"it equals its input under {first}")
        assert "@base" in mixed[key].message.split(":")[0]
