"""Mutation tests: every check is shown to fail. A fault switched on inside
the real CPU engine (`--inject-faults`, harness tests only) must make exactly
the check that targets it fail, with the right cause: on this host, and on
the noisy engine (`--engine-noise`) judged by its calibrated profiles.

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
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scenario_runs import run_scenarios

ROOT = Path(__file__).resolve().parents[1]


def fault_test(test):
    """A test that switches a fault on inside the real engine."""
    return pytest.mark.engine(pytest.mark.mutation(test))


MODEL = "tiny-gemma4"
# benchmarks/measure_sensitivity.py on this tier: every clip, image and frame
# the leaks reach is caught from SENSITIVITY_SCALE; the tests run at 3 times it.
SENSITIVITY_SCALE = 3e-5
LEAK_SCALE = 3 * SENSITIVITY_SCALE
# Every fault run again on the noisy engine (--engine-noise), a noisy host on
# any machine, judged by that host kind's calibrated profiles: the checks
# must still fail on the faults, at the threshold measured under that noise
# (benchmarks/measure_sensitivity.py --engine-noise NOISE: on an Intel Xeon
# with AMX, _C, every clip, image and frame caught from 0.03 of its std).
NOISE = 3e-5
NOISY_SENSITIVITY_SCALE = 0.03
NOISY_LEAK_SCALE = 3 * NOISY_SENSITIVITY_SCALE


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
# The runs whose checks compare answers, and so read a noise profile: the
# others' checks are premises and crashes, which the noise cannot move, so
# they run on this host only (an engine run spared from make test each).
COMPARING = ("leak_cross_cache_8khz", "encoder_faults", "lora_faults")


@pytest.fixture(scope="module", params=[0.0, NOISE], ids=["host", "noisy"])
def fault_run(request, tmp_path_factory):
    """fault_run(name): the records of the scenario run RUNS names, run on
    first use: on this host, then on the noisy engine (whose profiles are
    calibrated first where this host kind has none for it)."""
    noise, done = request.param, {}
    extra = [f"--engine-noise={noise}", f"--fault-scale={NOISY_LEAK_SCALE}"] if noise else \
        [f"--fault-scale={LEAK_SCALE}"]
    if noise:
        calibrated = subprocess.run(
            [sys.executable, "-m", "harness", "calibrate", "--missing", f"--engine-noise={noise}", "--model", MODEL,
             "-k", " or ".join(f"({RUNS[name][1]})" for name in COMPARING),
             *(f"scenarios/{module}" for module in dict.fromkeys(RUNS[name][2] for name in COMPARING))],
            cwd=ROOT, capture_output=True, text=True, timeout=3600)
        assert calibrated.returncode == 0, calibrated.stdout[-3000:] + calibrated.stderr[-3000:]

    def records(name: str) -> dict:
        if noise and name not in COMPARING:
            pytest.skip(f"{name}'s checks compare no answers: no noise profile judges them")
        if name not in done:
            faults, selection, module = RUNS[name]
            try:
                done[name], _ = run_scenarios(module, tmp_path_factory.mktemp(name), "--model", MODEL,
                                              "-k", selection, f"--inject-faults={faults}", *extra)
            except AssertionError as no_results:  # the run's other tests fail the same, without a rerun
                done[name] = no_results
        if isinstance(done[name], AssertionError):
            raise done[name]
        return done[name]
    return records


def assert_failed(rec, cause: str, says: str) -> None:
    assert (rec.verdict, rec.cause) == ("fail", cause), rec.message
    assert says in rec.message


@fault_test
def test_mutation_padding_leak_fails_batch_invariance_with_mismatch(fault_run):
    """The fault perturbs every clip shorter than the longest in its encoder
    call by LEAK_SCALE of its embedding's std: all three fail with
    mismatch, the longest (untouched) still passes."""
    records = fault_run("leak_cross_cache_8khz")
    verdicts = {k: (r.verdict, r.cause) for k, r in records.items()
                if k.startswith("test_batch_invariance[") and f"ragged-{MODEL}" in k}
    assert verdicts == {f"test_batch_invariance[clip{i}-ragged-{MODEL}]": ("fail", "mismatch")
                        for i in range(3)} | {f"test_batch_invariance[clip3-ragged-{MODEL}]": ("pass", None)}


@fault_test
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


@fault_test
def test_mutation_single_request_steps_fails_the_one_pass_and_served_together_premises(fault_run):
    records = fault_run("single_steps")
    assert_failed(records[f"test_one_pass[ragged-{MODEL}]"], "premise", "not scheduled in one step")
    assert_failed(records[f"test_concurrent_matches_solo[normal-{MODEL}]"], "premise", "not served together")


@fault_test
def test_mutation_raise_in_the_audio_encoder_is_a_crash_naming_the_exception(fault_run):
    records = fault_run("ragged_raise")
    for check in ("test_one_pass", "test_alive_after_batch"):
        rec = records[f"{check}[ragged-{MODEL}]"]
        assert rec.verdict == "fail", rec
        # vLLM's worker wraps it: "RuntimeError: Worker failed with error '…'"
        assert rec.cause.startswith("python-exception: RuntimeError") and \
            "mmharness fault: ragged audio batch" in rec.cause, rec.cause


@fault_test
def test_mutation_reference_from_the_cache_fails_isolation(fault_run):
    records = fault_run("leak_cross_cache_8khz")
    assert_failed(records[f"test_concurrent_matches_solo[normal-{MODEL}]"], "premise", "not isolated")


@fault_test
def test_mutation_8khz_refused_fails_the_edge_check(fault_run):
    records = fault_run("leak_cross_cache_8khz")
    assert_failed(records[f"test_edge_input[{MODEL}-8kHz]"], "http-4xx", "a valid input refused")


@fault_test
def test_mutation_total_passed_as_free_fails_the_call_site_check(fault_run):
    records = fault_run("encoder_faults")
    assert_failed(records[f"test_chunk_from_free_memory[{MODEL}]"],
                  "over-budget: chunk sized from total memory, not free", "passed the total")


@fault_test
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


@fault_test
def test_mutation_ignored_vision_mlp_lora_is_named_by_its_probes(fault_run):
    """The vision tower's MLP layers are silently left without LoRA inside
    the engine: the probes on those three groups fail naming each, and the
    attention probes (untouched by the fault) still pass."""
    records = fault_run("lora_faults")
    for group in ("vision.gate", "vision.up", "vision.down"):
        rec = records[f"test_probe[tp1-{MODEL}-{group}]"]
        assert_failed(rec, f"no-effect: {group}", f"the {group} group changed nothing for image")
        assert rec.evidence["hf_premise"].startswith("HF + peft output changed")
    assert {records[f"test_probe[tp1-{MODEL}-vision.{p}]"].verdict for p in "qkvo"} == {"pass"}


@fault_test
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


# What shows each scenario check failing: a fault inside the engine (a test
# of this module), or a crafted input to the same check (another module's
# test, "path::name"); a check with neither says why. The scenario
# docstrings state what a check holds; this is the record of its failing.
SHOWN_TO_FAIL = {
    "test_fuzz_multimodal.py::test_fuzz_batches": [
        "tests/test_fuzz_mutation.py::test_the_fuzzer_finds_the_leak_and_shrinks_it_to_two_clips_of_different_lengths"],
    "test_fuzz_multimodal.py::test_fuzz_replay": [
        "tests/test_fuzz_mutation.py::test_the_replay_command_and_repro_py_each_reproduce_it"],
    # On the real engine: findings 003, 010 and 011 (known issues) fail it in make run.
    "test_fuzz_multimodal.py::test_fuzz_hostile": [
        "tests/test_fuzz_search.py::test_nothing_found_fails_with_the_shrunk_cause_and_on_no_examples"],
    "test_ragged_audio.py::test_one_pass": [
        "test_mutation_single_request_steps_fails_the_one_pass_and_served_together_premises",
        "test_mutation_raise_in_the_audio_encoder_is_a_crash_naming_the_exception"],
    "test_ragged_audio.py::test_batch_invariance": [
        "test_mutation_padding_leak_fails_batch_invariance_with_mismatch",
        "test_mutation_one_clips_media_in_another_rows_answer_is_named"],
    # On the real engine: finding 015 (Gemma4 unified, one placeholder short) fails it in make run.
    "test_ragged_audio.py::test_placeholders_as_the_processor": [
        "tests/test_check_vocabulary.py::test_placeholders_as_the_processor_fails_naming_a_clip_one_short"],
    "test_ragged_audio.py::test_alive_after_batch": [
        "test_mutation_raise_in_the_audio_encoder_is_a_crash_naming_the_exception"],
    "test_ragged_audio.py::test_concurrent_all_answered": [
        "tests/test_checks.py::test_completed_fails_on_the_first_unanswered_naming_it"],
    "test_ragged_audio.py::test_concurrent_matches_solo": [
        "test_mutation_single_request_steps_fails_the_one_pass_and_served_together_premises",
        "test_mutation_reference_from_the_cache_fails_isolation"],
    "test_ragged_audio.py::test_alive_after_load": [
        "tests/test_checks.py::test_a_dead_engine_fails_with_its_crash_cause_without_being_asked",
        "tests/test_checks.py::test_an_engine_that_does_not_answer_is_not_alive"],
    "test_ragged_audio.py::test_edge_input": [
        "test_mutation_8khz_refused_fails_the_edge_check",
        "tests/test_checks.py::test_anything_else_fails_naming_the_input"],
    "test_ragged_images.py::test_one_pass": [
        "tests/test_check_vocabulary.py::test_one_pass_needs_every_prompt_in_one_step_and_the_shapes_it_names",
        "tests/test_encoder_call.py::test_images_concatenated_as_patches_are_read_by_their_grids"],
    "test_ragged_images.py::test_placeholders_as_the_processor": [
        "tests/test_check_vocabulary.py::test_image_placeholders_as_the_processor_fails_naming_a_request_one_short"],
    # On the real engine: finding 020 (Gemma4, one image of a ragged batch) fails it in make run.
    "test_ragged_images.py::test_batch_invariance": [
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position",
        "tests/test_checks.py::test_power_fails_the_premise_when_a_wrong_answer_is_accepted"],
    "test_ragged_images.py::test_tp_invariance": [
        "tests/test_lora_effects.py::test_tp_sizes_are_held_to_the_tp_profile_and_every_rank_must_step",
        "tests/test_check_vocabulary.py::test_one_pass_needs_every_prompt_in_one_step_and_the_shapes_it_names"],
    "test_ragged_images.py::test_alive_after_batch": [
        "tests/test_checks.py::test_a_dead_engine_fails_with_its_crash_cause_without_being_asked"],
    "test_encoder_memory.py::test_all_answered_without_oom": [
        "tests/test_checks.py::test_completed_fails_on_the_first_unanswered_naming_it"],
    "test_encoder_memory.py::test_encoder_chunked_on_card": [
        "tests/test_card_chunks.py::test_chunked_needs_a_batch_in_more_than_one_pass"],
    "test_encoder_memory.py::test_batch_invariance_on_card": [
        "test_mutation_vision_chunk_leak_fails_every_vision_invariance"],
    "test_encoder_memory.py::test_alive_after_encoder_batch": [
        "tests/test_checks.py::test_a_dead_engine_fails_with_its_crash_cause_without_being_asked"],
    "test_encoder_memory.py::test_peak_within_emulated_card": [
        "tests/test_cards.py::test_budget_check_holds_the_peak_to_the_budget_not_the_capacity"],
    "test_encoder_memory.py::test_encoder_transient_within_stated_budget": [
        "tests/test_card_chunks.py::test_transient_held_to_the_stated_budget_where_the_allocator_measured_it",
        "tests/gpu/test_gpu_encoder_transient.py::test_everything_in_one_pass_against_little_free_memory_is_over_budget"],
    "test_encoder_memory.py::test_chunk_from_free_memory": [
        "test_mutation_total_passed_as_free_fails_the_call_site_check"],
    "test_encoder_memory.py::test_chunk_boundary_invariance": [
        "test_mutation_vision_chunk_leak_fails_every_vision_invariance"],
    "test_encoder_memory.py::test_ragged_video_one_pass": [
        "tests/test_check_vocabulary.py::test_one_pass_needs_every_prompt_in_one_step_and_the_shapes_it_names"],
    "test_encoder_memory.py::test_ragged_video_invariance": [
        "test_mutation_vision_chunk_leak_fails_every_vision_invariance"],
    "test_encoder_memory.py::test_encoder_chunk_budget_contract": [
        "tests/test_budget_probe.py::test_a_chunk_sized_from_total_memory_is_caught_where_the_card_is_loaded",
        "tests/test_budget_probe.py::test_a_zero_chunk_is_caught_below_one_images_share",
        "tests/test_budget_probe.py::test_a_chunk_that_shrinks_by_one_as_free_memory_grows_is_caught_where_it_shrinks"],
    "test_quantized_load.py::test_engine_agrees_with_the_dequantized_model": [
        "tests/test_tiny_models_awq.py::test_engine_on_the_quantized_model_agrees_with_hf_on_its_dequantized_twin"],
    "test_cache_consistency.py::test_cell_caches_as_set": [
        "tests/test_cache_cells.py::test_the_cell_premise_fails_when_a_setting_did_not_take"],
    "test_cache_consistency.py::test_sequential_matches_references": [
        "tests/test_scenario_cache.py::test_a_cache_serving_another_items_features_fails_both_orders_with_mismatch"],
    "test_cache_consistency.py::test_concurrent_matches_references": [
        "tests/test_scenario_cache.py::test_a_cache_serving_another_items_features_fails_both_orders_with_mismatch"],
    "test_cache_consistency.py::test_alive_after_cell": [
        "tests/test_checks.py::test_a_dead_engine_fails_with_its_crash_cause_without_being_asked"],
    "test_aborts_preemption.py::test_preempted_and_resumed": [
        "tests/test_aborts_checks.py::test_a_run_that_preempted_nothing_judges_no_resumed_request",
        "tests/test_aborts_checks.py::test_a_preempted_request_must_be_seen_to_finish"],
    "test_aborts_preemption.py::test_preempted_answers_match_references": [
        "tests/test_scenario_aborts.py::test_a_resumed_request_that_repeats_a_token_fails_with_mismatch"],
    "test_aborts_preemption.py::test_clients_gone_were_aborted": [
        "tests/test_aborts_checks.py::test_clients_gone_abort_their_requests_one_at_least_holding_blocks"],
    "test_aborts_preemption.py::test_aborted_requests_freed_their_memory": [
        "tests/test_scenario_aborts.py::test_an_aborted_request_that_keeps_its_blocks_is_a_leak",
        "tests/test_aborts_checks.py::test_blocks_or_slots_still_held_when_idle_are_a_leak"],
    # The same comparison as the first round's; the fault's run fails them
    # too where a later round preempts a request with output tokens.
    "test_aborts_preemption.py::test_answers_beside_aborts_match_references": [
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position",
        "tests/test_checks.py::test_power_fails_the_premise_when_a_wrong_answer_is_accepted"],
    "test_aborts_preemption.py::test_later_answers_match_references": [
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position",
        "tests/test_checks.py::test_power_fails_the_premise_when_a_wrong_answer_is_accepted"],
    "test_aborts_preemption.py::test_alive_after_aborts": [
        "tests/test_checks.py::test_a_dead_engine_fails_with_its_crash_cause_without_being_asked"],
    "test_soak.py::test_soak_answered": [
        "tests/test_scenario_soak.py::test_an_engine_that_stops_admitting_is_a_hang_of_the_soak_with_stacks_and_nothing_left",
        "tests/test_soak_checks.py::test_a_crash_fails_every_check_with_its_cause",
        "tests/test_soak_checks.py::test_an_unanswered_request_fails_with_its_status"],
    "test_soak.py::test_soak_answers_match_references": [
        "tests/test_scenario_soak.py::test_a_cache_serving_another_items_features_fails_the_sampled_answers",
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position",
        "tests/test_checks.py::test_power_fails_the_premise_when_a_wrong_answer_is_accepted",
        "tests/test_soak_checks.py::test_a_soak_too_short_for_its_warm_up_fails_its_premise"],
    "test_soak.py::test_soak_memory_flat": [
        "tests/test_scenario_soak.py::test_encoder_outputs_kept_alive_are_a_leak_of_the_worker"],
    "test_soak.py::test_soak_latency_steady": [
        "tests/test_scenario_soak.py::test_steps_slowing_down_are_a_drift"],
    "test_soak.py::test_soak_goodput": [
        "tests/test_soak_checks.py::test_a_slowdown_is_a_drift_and_misses_the_slo"],
    "test_vision_lora.py::test_lora_served": [
        "tests/test_lora_effects.py::test_any_other_start_up_failure_stays_a_failure",
        "tests/test_lora_effects.py::test_a_refusal_where_the_matrix_says_lora_is_served_is_a_regression"],
    "test_vision_lora.py::test_adapter_takes_effect": [
        "tests/test_lora_effects.py::test_a_probe_that_changes_nothing_names_its_group"],
    "test_vision_lora.py::test_published_adapters_take_effect": [
        "tests/test_lora_effects.py::test_a_probe_that_changes_nothing_names_its_group"],
    "test_vision_lora.py::test_tower_adapter_leaves_text_alone": [
        "tests/test_lora_effects.py::test_an_adapter_that_reaches_text_it_cannot_see_fails"],
    "test_vision_lora.py::test_probe": [
        "test_mutation_ignored_vision_mlp_lora_is_named_by_its_probes"],
    "test_vision_lora.py::test_hf_agreement": [
        "tests/test_comparators.py::test_split_beyond_the_measured_margin_fails",
        "tests/test_lora_effects.py::test_agreement_needs_a_comparator_that_sees_the_adapter"],
    "test_vision_lora.py::test_mixed_batch": [
        "test_mutation_a_base_row_run_under_an_adapter_is_named",
        "tests/test_lora_effects.py::test_one_step_must_hold_every_prompt_under_its_adapter"],
    "test_vision_lora.py::test_switch_and_reload": [
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position",
        "tests/test_checks.py::test_power_fails_the_premise_when_a_wrong_answer_is_accepted",
        "tests/test_engine_lora.py::test_a_refused_load_says_the_servers_reason"],
    "test_vision_lora.py::test_processor_cache": [
        "tests/test_check_vocabulary.py::test_a_cache_check_needs_a_hit_for_every_media_item",
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position"],
    "test_vision_lora.py::test_base_untouched_with_every_slot_full": [
        "tests/test_lora_effects.py::test_a_base_row_that_ran_under_an_adapter_is_named"],
    "test_vision_lora.py::test_chunking_under_lora": [
        "tests/test_lora_effects.py::test_passes_over_the_stated_chunk_fail_over_budget"],
    "test_vision_lora.py::test_tp_invariance": [
        "tests/test_lora_effects.py::test_tp_sizes_are_held_to_the_tp_profile_and_every_rank_must_step"],
    "test_vision_lora.py::test_modalities_mixed": [
        "tests/test_lora_effects.py::test_one_step_must_hold_every_prompt_under_its_adapter",
        "tests/test_checks.py::test_invariant_fails_a_real_divergence_with_its_position"],
}


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef)}


def scenario_checks() -> set[str]:
    return {f"{path.name}::{name}" for path in (ROOT / "scenarios").glob("test_*.py")
            for name in _functions(path) if name.startswith("test_")}


def test_every_scenario_check_names_what_shows_it_failing():
    assert set(SHOWN_TO_FAIL) == scenario_checks()
    here = _functions(Path(__file__))
    for check, shown_by in SHOWN_TO_FAIL.items():
        assert shown_by, check
        for name in shown_by:
            path, _, test = name.rpartition("::")
            functions = _functions(ROOT / path) if path else here
            assert test in functions, f"{check}: no test {name}"
            if not path:  # a fault run must read that check's own records
                source = ast.get_source_segment(Path(__file__).read_text(encoding="utf-8"), functions[test])
                assert check.split("::")[1] in source, f"{test} reads no record of {check}"
