"""The aborts-and-preemption family for real on the CPU tier's tiny Gemma4,
with two faults inside the engine's scheduler at once:
`resume-repeats-token` (a preempted request forgets its last output token,
so its client receives it twice) and `abort-keeps-a-block` (the first
request aborted keeps one KV block). The run that preempted fails with
`mismatch`, the memory check with `leak` naming the blocks still held; the
premises and the alive check still pass: requests were preempted and
aborted, and the engine lives. The healthy engine's verdicts are `make
run`'s."""
from __future__ import annotations

import pytest

from harness.results.run import load_results
from tests.scenario_runs import run_scenarios
from tests.test_mutations import MODEL, fault_test

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aborts")
    records, out = run_scenarios("test_aborts_preemption.py", tmp, "--model", MODEL,
                                 "--inject-faults=resume-repeats-token,abort-keeps-a-block")
    return records, out, tmp / "run"


def _record(records, check):
    return records[f"test_{check}[{MODEL}]"]


@fault_test
def test_a_resumed_request_that_repeats_a_token_fails_with_mismatch(faulted):
    """The first round's comparison, whose premise saw a request preempted
    after it had output tokens (one the fault can drop). The later rounds
    preempt too, but where and when depends on the machine's load."""
    records, out, _ = faulted
    premise = _record(records, "preempted_and_resumed")
    assert premise.verdict == "pass", premise.message
    if not any(p["output_tokens"] > 0 for p in premise.evidence["preemption"]["preemptions"]):
        pytest.skip(f"no request was preempted after it had output tokens, so the fault had none to drop: "
                    f"{premise.evidence['preemption']}")
    rec = _record(records, "preempted_answers_match_references")
    assert (rec.verdict, rec.cause) == ("fail", "mismatch"), (rec.message, out.stdout[-2000:])
    assert "diverged at position" in rec.message, rec.message


@pytest.mark.engine
def test_the_run_counts_its_engine_starts(faulted):
    """Every engine the run started is counted, with its seconds, in the
    results' metadata and in the run's last lines."""
    records, out, run_dir = faulted
    run = load_results(run_dir).run
    engines = [r for r in records.values() if r.family == "engine_teardown"]
    assert engines and run["engine_starts"]["count"] == len(engines), run.get("engine_starts")
    assert run["engine_starts"]["seconds"] > 0 and 0 < run["engine_starts"]["share"]
    assert f"mmharness: {len(engines)} engine starts, " in out.stdout, out.stdout[-2000:]


@fault_test
def test_an_aborted_request_that_keeps_its_blocks_is_a_leak(faulted):
    """The fault acts on an abort of a request holding KV blocks. The
    leaving clients watch the engine so that they abort (see docs/families/aborts-preemption.md);
    should none still abort in time, the fault had nothing to act on, the
    abort premise says so, and this test skips, naming it."""
    records, out, _ = faulted
    premise = _record(records, "clients_gone_were_aborted")
    if premise.verdict == "fail" and premise.cause == "premise":
        pytest.skip(f"no request was aborted in this run, so the fault had nothing to keep: {premise.message}")
    rec = _record(records, "aborted_requests_freed_their_memory")
    assert (rec.verdict, rec.cause) == ("fail", "leak"), (rec.message, out.stdout[-2000:])
    assert "still holds 1 KV block(s)" in rec.message and rec.evidence["held_by_finished_requests"] == {"kv_blocks": 1}
    for check in ("alive_after_aborts",):
        assert _record(records, check).verdict == "pass", _record(records, check).message
