"""The fuzzer's search on a judge of the harness's own making (no engine):
it shrinks each failure to the smallest spec of the same cause, judges a
spec once, stops at its budget, tries the database's failures first, goes
on exploring past a failure it knows, and never reports an inconclusive
example as a failure."""
from __future__ import annotations

import time

import pytest

from harness.verdicts import Cause, CheckFailure
from harness.fuzz.search import search
from harness.fuzz.space import Limits, canonical
from harness.fuzz.strategies import batches
from harness.results.record import CheckRecord
from harness.runner.check import Check

# Shrink budgets are generous (make test runs these beside engines on two
# workers); the exploring budgets short, since a search explores all of its
# budget, and these judges' faults show within a few examples.
LIMITS = Limits(model="tiny", modalities=("audio", "image", "video"), per_prompt={"audio": 1, "image": 4, "video": 1},
                max_requests=4, step_tokens=8192, max_model_len=2048, max_audio_s=30.0, audio_ms_per_token=40,
                audio_tokens=750, image_tokens=70, frame_tokens=70, max_frames=32)


def durations(spec):
    return sorted(it["duration_cs"] for r in spec["requests"] for it in r["items"] if it["kind"] == "audio")


def leaky(spec):
    """A padding leak: fails whenever clips of different lengths share a batch."""
    if len(set(durations(spec))) > 1:
        raise CheckFailure(Cause.MISMATCH, f"clips {durations(spec)} leak into each other")


def test_a_failure_shrinks_to_two_clips_of_different_lengths(tmp_path):
    result = search(batches(LIMITS), leaky, budget_s=3, shrink_s=120, seed=3, database=tmp_path)
    [found] = result.found
    assert found.cause == "mismatch"
    assert len(found.spec["requests"]) == 2 and len(set(durations(found.spec))) == 2, found.spec
    assert all(len(r["items"]) == 1 for r in found.spec["requests"]), found.spec
    # Drawn within the budget, judged (and shrinking begun) after the draw.
    assert 0 <= result.first_failure_drawn_s <= min(result.budget_s, result.search_seconds)


def test_each_cause_shrinks_on_its_own(tmp_path):
    """Two faults of two causes: each is shrunk through examples of its own
    cause only (a mismatch never shrinks into a premise failure)."""
    def judge(spec):
        if any(sum(it["kind"] == "image" for it in r["items"]) >= 3 for r in spec["requests"]):
            raise CheckFailure(Cause.PREMISE, "three images never share one step")
        leaky(spec)
    result = search(batches(LIMITS), judge, budget_s=3, shrink_s=120, seed=5, database=tmp_path)
    by_cause = {f.cause: f.spec for f in result.found}
    assert set(by_cause) == {"mismatch", "premise"}
    premise = by_cause["premise"]["requests"]
    assert len(premise) == 1 and [it["kind"] for it in premise[0]["items"]] == ["image"] * 3, premise
    assert len(set(durations(by_cause["mismatch"]))) == 2


def test_a_spec_is_judged_once(tmp_path):
    seen = []

    def judge(spec):
        seen.append(canonical(spec))
        leaky(spec)
    result = search(batches(LIMITS), judge, budget_s=3, shrink_s=10, seed=1, database=tmp_path)
    assert len(seen) == len(set(seen)) == result.examples


def test_the_search_stops_at_its_budget(tmp_path):
    def slow(spec):
        time.sleep(0.2)
    began = time.monotonic()
    result = search(batches(LIMITS), slow, budget_s=2, seed=1, database=tmp_path)
    assert result.found == [] and 2 <= result.examples <= 12
    assert time.monotonic() - began < 2 + 0.2 + 15  # one example past the line, and hypothesis's own wind-down


def test_the_database_tries_a_failure_found_before_first(tmp_path):
    search(batches(LIMITS), leaky, budget_s=3, shrink_s=120, seed=3, database=tmp_path)
    first = []

    def judge(spec):
        first.append(spec)
        leaky(spec)
    again = search(batches(LIMITS), judge, budget_s=2, shrink_s=5, seed=99, database=tmp_path)
    assert len(set(durations(first[0]))) == 2 and again.found


def test_an_inconclusive_example_is_counted_and_never_found(tmp_path):
    from harness.fuzz.search import Inconclusive

    def judge(spec):
        if len(spec["requests"]) > 2:
            raise Inconclusive("too many to tell apart")
    result = search(batches(LIMITS), judge, budget_s=3, seed=2, database=tmp_path)
    assert result.found == [] and result.inconclusive["too many to tell apart"] > 0


def test_nothing_found_fails_with_the_shrunk_cause_and_on_no_examples(tmp_path):
    result = search(batches(LIMITS), leaky, budget_s=3, shrink_s=120, seed=3, database=tmp_path)
    check = Check(CheckRecord(id="fuzz"))
    with pytest.raises(CheckFailure) as failed:
        check.nothing_found(result)
    assert failed.value.cause == Cause.MISMATCH and "shrunk to 2 req · audiox2 · ragged audio" in failed.value.message
    assert failed.value.evidence["other_failures"] == []
    result.found, result.examples = [], 0
    with pytest.raises(CheckFailure, match="judged no example"):
        check.nothing_found(result)


def test_a_failure_known_from_the_database_does_not_end_the_exploration(tmp_path):
    """The database brings the padding leak back first; the search passes
    over its repeats and still finds, and shrinks, a second fault."""
    search(batches(LIMITS), leaky, budget_s=3, shrink_s=120, seed=3, database=tmp_path)

    def judge(spec):
        if any(sum(it["kind"] == "image" for it in r["items"]) >= 3 for r in spec["requests"]):
            raise CheckFailure(Cause.PREMISE, "three images never share one step")
        leaky(spec)
    result = search(batches(LIMITS), judge, budget_s=5, shrink_s=120, seed=11, database=tmp_path)
    assert [f.cause for f in result.found][:1] == ["mismatch"]  # the database's, first
    assert {f.cause for f in result.found} == {"mismatch", "premise"}
    assert result.again["mismatch"] > 0  # met again while exploring, and passed over


def test_signatures_tell_exceptions_and_statuses_apart():
    from harness.verdicts import DetailedCause
    from harness.fuzz.search import signature
    crash = CheckFailure(DetailedCause(Cause.PYTHON_EXCEPTION, "IndexError: too many indices (3 > 1)"), "died")
    assert signature(crash) == "python-exception: IndexError"
    refused = CheckFailure(Cause.HTTP_5XX, "500", evidence={"result": {"rejected": 500}})
    assert signature(refused) == "http-5xx: 500"
    assert signature(CheckFailure(Cause.MISMATCH, "differs")) == "mismatch"


def test_a_failure_the_database_brings_back_is_not_shrunk_again(tmp_path):
    """Replayed as it was shrunk: its judge sees the database's examples and
    none of a shrink (each candidate of an engine-killing failure is an
    engine restart), and it is found and known before the exploration."""
    first = search(batches(LIMITS), leaky, budget_s=3, shrink_s=120, seed=3, database=tmp_path)
    judged = []

    def judge(spec):
        judged.append(spec)
        leaky(spec)
    # No exploring budget: what is judged is the database's replay alone.
    again = search(batches(LIMITS), judge, budget_s=0, shrink_s=120, seed=99, database=tmp_path)
    assert [f.spec for f in again.found] == [first.found[0].spec]
    assert judged == [first.found[0].spec], judged
