"""The flaky verdict on the real engine: a fault inside the engine that
fails a check's first attempt only gives `flaky`; one that fails both
attempts gives the failure, confirmed.

One scenario run of the ragged-audio family (`--reruns 1`) holds both:
the padding leak acts once (`--fault-once`: in the batch engine it first
perturbs, claimed by a marker under the run directory), the media cross
on every engine. The ragged batch's clip0 fails on the padding leak; its
rerun retires the batch engine and the reference engine, computes the
module's `batch` fixture again on new ones, where the leak no longer
acts: flaky. The equal batch's clip3 gets clip0's embedding on every
engine: it fails on the rerun too. Were the rerun on the old engine, or
on the old run, clip0 would fail again.
"""
from pathlib import Path

import pytest

from tests.scenario_runs import run_scenarios
from tests.test_mutations import LEAK_SCALE, MODEL

pytestmark = [pytest.mark.engine, pytest.mark.mutation]

RAGGED, EQUAL = f"test_batch_invariance[clip0-ragged-{MODEL}]", f"test_batch_invariance[clip3-equal-{MODEL}]"


@pytest.fixture(scope="module")
def flaky_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flaky")
    records, out = run_scenarios("test_ragged_audio.py", tmp, "--model", MODEL, "--reruns", "1",
                                 "-k", "batch_invariance and (clip0 and ragged or clip3 and equal)",
                                 "--inject-faults=padding-leak,media-cross", "--fault-once=padding-leak",
                                 f"--fault-scale={LEAK_SCALE}")
    return records, out, tmp


def test_a_fault_in_the_first_attempts_engine_only_is_flaky(flaky_run):
    records, out, tmp = flaky_run
    rec = records[RAGGED]
    assert (rec.verdict, rec.cause) == ("flaky", "mismatch"), rec.message
    first, rerun = rec.attempts
    assert first["verdict"] == "fail" and first["message"] == rec.message and "clip0" in rec.message
    assert (rerun["verdict"], rerun["outcome"]) == ("pass", "passed: flaky")
    # Fresh engines: the rerun's log slice and timeline are of another
    # engine than the first attempt's, whose own stay in place.
    for kind in ("log_path", "timeline_path"):
        assert first[kind] != rerun[kind] and all(Path(a[kind]).exists() for a in (first, rerun)), kind
    # The leak acted in one engine, the first attempt's batch engine, and claimed it.
    [marker] = (tmp / "run" / "fault-markers").iterdir()
    assert marker.name == "padding-leak"
    assert f"mmharness: flaky: scenarios/test_ragged_audio.py::{RAGGED}: mismatch" in out.stdout


def test_a_fault_in_every_engine_fails_both_attempts_and_stays_a_failure(flaky_run):
    records, out, _ = flaky_run
    rec = records[EQUAL]
    assert (rec.verdict, rec.cause) == ("fail", "mismatch"), rec.message
    assert "it equals clip0:3s's solo answer" in rec.message
    assert [(a["verdict"], a["cause"]) for a in rec.attempts] == [("fail", "mismatch")] * 2
    assert rec.attempts[1]["outcome"] == "the same cause: confirmed"
    assert out.returncode == 1  # a confirmed failure beside a flaky check: new findings
