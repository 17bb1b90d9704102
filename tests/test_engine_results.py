"""cause_of: the cause each kind of engine result carries into a failure."""
import pytest

from harness.verdicts import Cause, DetailedCause
from harness.engines.outcomes import Completion, EngineCrashed, Rejected, RequestTimedOut, cause_of


def test_a_completion_has_no_cause():
    assert cause_of(Completion(text="hi", token_ids=[1, 2])) is None


@pytest.mark.parametrize("status, cause", [
    (500, Cause.HTTP_5XX), (503, Cause.HTTP_5XX),
    (400, Cause.HTTP_4XX), (422, Cause.HTTP_4XX),
    (None, Cause.HTTP_4XX),  # offline input error: a verdict on the input, like a 4xx
])
def test_a_rejection_is_classed_by_its_status(status, cause):
    assert cause_of(Rejected(status=status, message="no")) is cause


def test_a_crash_carries_its_own_cause_detail_included():
    dead = EngineCrashed(cause=Cause.ENGINE_DEAD)
    assert cause_of(dead) is Cause.ENGINE_DEAD
    exception = DetailedCause(Cause.PYTHON_EXCEPTION, "KeyError: 'pixel_values'")
    assert cause_of(EngineCrashed(cause=exception)) is exception


def test_a_timeout_is_timeout():
    assert cause_of(RequestTimedOut(seconds=3.0)) is Cause.TIMEOUT


def test_a_crash_serializes_its_cause_as_the_record_text():
    crash = EngineCrashed(cause=DetailedCause(Cause.PYTHON_EXCEPTION, "KeyError: 'frames'"), exit_code=1)
    d = crash.to_dict()
    assert d["cause"] == "python-exception: KeyError: 'frames'" and type(d["cause"]) is str
    assert d["crashed"] is True and d["exit_code"] == 1
