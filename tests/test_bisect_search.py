"""The bisect's search over stub outcomes (harness.bisect.search, .store):
no engine, no install."""
import pytest

from harness.bisect.search import (BAD, FAIL, FLAKY, GOOD, OTHER_CAUSE, PASS, UNTESTABLE, MemoryStore,
                                   Outcome, bisect)
from harness.bisect.store import FileStore, StoreMismatch

VERSIONS = [f"0.{n}.0" for n in range(20, 33)]  # 0.20.0 .. 0.32.0


class Stub:
    """Outcomes by version; everything else passes. Counts the probes."""

    def __init__(self, outcomes: dict[str, Outcome | list[Outcome]]):
        self.outcomes = outcomes
        self.probed: list[str] = []

    def __call__(self, version: str) -> Outcome:
        self.probed.append(version)
        got = self.outcomes.get(version, Outcome(PASS))
        if isinstance(got, list):
            return got[self.probed.count(version) - 1]
        return got


def broken_from(first: str, cause="engine-dead", **others) -> Stub:
    return Stub({v: Outcome(FAIL, cause) for v in VERSIONS if v >= first} | others)


def test_a_monotone_history_finds_the_first_bad_version_in_log_steps():
    stub = broken_from("0.27.0")
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", stub)
    assert (answer.first, answer.last, answer.skipped) == ("0.27.0", "0.26.0", [])
    assert answer.sentence == "first bad in 0.27.0 (last good 0.26.0); bad: engine-dead"
    assert answer.bad_cause == "engine-dead"
    # Both ends, then about log2(11) middles; every failure once more.
    assert len(set(stub.probed)) <= 2 + 4
    assert all(stub.probed.count(v) == 2 for v in set(stub.probed) if v >= "0.27.0")


def test_the_other_direction_finds_the_first_fixed_version():
    stub = Stub({v: Outcome(FAIL, "python-exception") for v in VERSIONS if v < "0.24.0"})
    answer = bisect(VERSIONS, "0.32.0", "0.20.0", stub)
    assert answer.sentence == "first fixed in 0.24.0 (last bad 0.23.0); bad: python-exception"


def test_untestable_versions_in_the_middle_are_skipped_and_named_when_they_blur_the_answer():
    untestable = Outcome(UNTESTABLE, detail="install failed: no torch==2.11.0+cpu")
    stub = broken_from("0.26.0", **{"0.25.0": untestable, "0.26.0": untestable})
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", stub)
    assert (answer.first, answer.last) == ("0.27.0", "0.24.0")
    assert answer.skipped == ["0.25.0", "0.26.0"]
    assert answer.sentence.endswith("or in one of 0.25.0, 0.26.0, which could not be judged")
    assert {s.version: s.label for s in answer.steps}["0.25.0"] == UNTESTABLE


def test_a_failure_with_another_cause_is_not_counted_as_bad():
    stub = broken_from("0.28.0", **{"0.26.0": Outcome(FAIL, "timeout")})
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", stub)
    labels = {s.version: s.label for s in answer.steps}
    assert answer.first == "0.28.0"
    if "0.26.0" in labels:
        assert labels["0.26.0"] == OTHER_CAUSE


def test_adjacent_ends_answer_at_once_and_one_version_between_is_probed_once():
    stub = broken_from("0.21.0")
    assert bisect(VERSIONS[:2], "0.20.0", "0.21.0", stub).sentence == "first bad in 0.21.0 (last good 0.20.0); bad: engine-dead"
    stub = broken_from("0.22.0")
    answer = bisect(VERSIONS[:3], "0.20.0", "0.22.0", stub)
    assert (answer.first, answer.last) == ("0.22.0", "0.21.0")
    assert stub.probed.count("0.21.0") == 1


@pytest.mark.parametrize("stub,said", [
    (broken_from("0.20.0"), "the good end 0.20.0 does not pass (fails with engine-dead)"),
    (Stub({}), "the bad end 0.32.0 does not fail inside the check (pass)"),
    (broken_from("0.27.0", **{"0.32.0": Outcome(UNTESTABLE, detail="unsupported: LoRA")}),
     "the bad end 0.32.0 does not fail inside the check (untestable: unsupported: LoRA)"),
], ids=["good-end-fails", "bad-end-passes", "bad-end-untestable"])
def test_ends_that_do_not_hold_stop_the_search_with_what_they_did(stub, said):
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", stub)
    assert answer.first is None and said in answer.broken_ends
    assert set(stub.probed) <= {"0.20.0", "0.32.0"}


def test_a_flaky_failure_is_confirmed_by_its_rerun_and_skipped():
    flaky = [Outcome(FAIL, "engine-dead"), Outcome(PASS)]
    stub = broken_from("0.30.0", **{"0.26.0": flaky})
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", stub)
    assert answer.first == "0.30.0"
    assert {s.version: s.label for s in answer.steps}["0.26.0"] == FLAKY
    assert stub.probed.count("0.26.0") == 2


def test_an_interrupted_bisect_resumes_from_its_store_without_probing_again(tmp_path):
    question = {"check": "x", "good": "0.20.0", "bad": "0.32.0"}
    truth = broken_from("0.27.0")
    calls = []

    def interrupted(version):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(version)
        return truth(version)

    with pytest.raises(KeyboardInterrupt):
        bisect(VERSIONS, "0.20.0", "0.32.0", interrupted, FileStore(tmp_path / "state.json", question))
    resumed = Stub(truth.outcomes)
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", resumed, FileStore(tmp_path / "state.json", question))
    assert (answer.first, answer.last) == ("0.27.0", "0.26.0")
    assert not set(resumed.probed) & set(calls[:4])  # what was judged is not run again
    uninterrupted = broken_from("0.27.0")
    bisect(VERSIONS, "0.20.0", "0.32.0", uninterrupted, MemoryStore())
    assert len(calls) + len(resumed.probed) == len(uninterrupted.probed)
    with pytest.raises(StoreMismatch, match="holds another bisect"):
        FileStore(tmp_path / "state.json", question | {"check": "y"})


def test_labels_of_the_steps_say_good_and_bad():
    answer = bisect(VERSIONS, "0.20.0", "0.32.0", broken_from("0.27.0"))
    labels = {s.version: s.label for s in answer.steps}
    assert labels["0.20.0"] == GOOD and labels["0.32.0"] == BAD
