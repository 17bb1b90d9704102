"""The aborts-and-preemption checks (harness/checks/aborts.py) on crafted
scheduler observations: each fails with its cause, and passes when what
it judges holds."""
import pytest

from harness.checks.aborts import check_aborted, check_freed, check_preempted, none_aborted_holding_blocks
from harness.verdicts import Cause, CheckFailure


def held(free, blocks=12, encoder_free=8192, slots=8192, running=0, waiting=0):
    return {"event": "held", "free_blocks": free, "blocks": blocks, "encoder_free": encoder_free,
            "encoder_slots": slots, "running": running, "waiting": waiting}


def failure(fn, *args) -> CheckFailure:
    with pytest.raises(CheckFailure) as caught:
        fn(*args)
    return caught.value


def test_a_run_that_preempted_nothing_judges_no_resumed_request():
    found = failure(check_preempted, [held(2, running=4), {"event": "finished", "requests": ["a", "b"]}])
    assert found.cause == Cause.PREMISE and "no request was preempted (fewest free KV blocks seen: 2)" in found.message


def test_a_preempted_request_must_be_seen_to_finish():
    observed = [{"event": "preempted", "request": "a", "computed": 300, "output_tokens": 5},
                {"event": "preempted", "request": "b", "computed": 300, "output_tokens": 7},
                {"event": "finished", "requests": ["a"]}]
    found = failure(check_preempted, observed)
    assert found.cause == Cause.PREMISE and "['b'] were never seen to finish" in found.message
    observed.append({"event": "finished", "requests": ["b", "c"]})
    assert [p["request"] for p in check_preempted(observed)["preemptions"]] == ["a", "b"]


def aborted(*held_blocks: dict) -> list[dict]:
    return [{"event": "aborted", "requests": sorted(h), "held_blocks": h} for h in held_blocks]


def test_clients_gone_abort_their_requests_one_at_least_holding_blocks():
    both = check_aborted(aborted({"a": 3}, {"c": 0}), 2)
    assert both["aborted"] == ["a", "c"] and both["left_after_the_end"] == 0
    # One client left after its request had finished: no abort, and no failure.
    assert check_aborted(aborted({"a": 3}), 2)["left_after_the_end"] == 1
    # None aborted, or none aborted holding blocks: nothing for the memory check.
    for observed in ([], aborted({"a": 0}, {"c": 0})):
        found = failure(check_aborted, observed, 2)
        assert found.cause == Cause.PREMISE and "no abort for the memory check" in found.message
    # More aborts than clients gone: the scheduler aborted a request whose client stayed.
    found = failure(check_aborted, aborted({"a": 3}, {"b": 2}, {"c": 1}), 2)
    assert found.cause == Cause.PREMISE and "aborted 3 request(s)" in found.message


def test_a_round_that_aborted_nothing_holding_blocks_is_told_apart_for_resending():
    """What the aborts family resends a round for; a round whose premise holds is kept."""
    assert none_aborted_holding_blocks([]) and none_aborted_holding_blocks(aborted({"a": 0}))
    assert not none_aborted_holding_blocks(aborted({"a": 0}, {"c": 2}))


def test_blocks_or_slots_still_held_when_idle_are_a_leak():
    assert check_freed([held(3, running=2), held(12)])["held_at_end"]["free_blocks"] == 12
    kv = failure(check_freed, [held(3, running=2), held(9)])
    assert kv.cause == Cause.LEAK and "still holds 3 KV block(s)" in kv.message
    assert kv.evidence["held_by_finished_requests"] == {"kv_blocks": 3}
    slots = failure(check_freed, [held(12, encoder_free=7936)])
    assert slots.cause == Cause.LEAK and slots.evidence["held_by_finished_requests"] == {"encoder_cache_slots": 256}


def test_memory_cannot_be_judged_before_the_scheduler_is_idle():
    assert failure(check_freed, [held(3, running=1)]).cause == Cause.PREMISE
    assert failure(check_freed, [{"event": "step"}]).cause == Cause.PREMISE
