"""The progress watch on observation files of its own making, with a clock
of its own: a request is stalled only when no step scheduled it for the
stall bound, a finished one never is, and a half-written line waits."""
from __future__ import annotations

import json

import pytest

from harness.engines.observations import Observations, names
from harness.engines.progress import POLL_S, ProgressWatch


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def setup(tmp_path):
    path = tmp_path / "engine.observe.jsonl"
    path.touch()
    clock = Clock()
    return ProgressWatch(Observations(path), stall_s=10, clock=clock), path, clock


def write(path, event: str, **fields) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"event": event, "t": 0, "pid": 1, **fields}) + "\n")


def step(path, *requests: str) -> None:
    write(path, "step", requests=len(requests), tokens={r: 1 for r in requests}, total_tokens=len(requests))


def test_engine_ids_name_the_drivers_requests():
    assert names("3-1a2b3c4d", "3") and names("3", "3")
    assert not names("13-1a2b3c4d", "3") and not names("3a-1a2b", "3")
    assert names("chatcmpl-mmh-ab12-9f8e7d6c", "mmh-ab12")
    assert not names("chatcmpl-mmh-ab123-9f8e7d6c", "mmh-ab12")


def test_a_request_scheduled_in_every_step_never_stalls(setup):
    watch, path, clock = setup
    watch.expect(["0"])
    for _ in range(10):
        clock.advance(5)
        step(path, "0-aa")
        assert watch.poll() is None
    assert watch.longest_quiet_s == pytest.approx(5)


def test_a_request_never_scheduled_while_others_move_is_stalled_after_the_bound(setup):
    watch, path, clock = setup
    watch.expect(["0", "1"])
    for _ in range(2):
        clock.advance(5)
        step(path, "0-aa")
        assert watch.poll() is None
    clock.advance(1)
    step(path, "0-aa")
    stall = watch.poll()
    assert stall is not None and stall.request == "1" and not stall.scheduled
    assert stall.seconds == pytest.approx(11) and stall.engine_stepped_s == pytest.approx(0)
    assert "never scheduled" in stall.describe() and "other requests moved" in stall.describe()
    assert stall.last_steps[-1]["tokens"] == {"0-aa": 1}


def test_an_engine_that_stops_working_stalls_every_request(setup):
    watch, path, clock = setup
    watch.expect(["0"])
    clock.advance(1)
    step(path, "0-aa")
    assert watch.poll() is None
    clock.advance(10 + POLL_S)
    stall = watch.poll()
    assert stall.request == "0" and stall.scheduled
    assert stall.engine_stepped_s == pytest.approx(10 + POLL_S)
    assert "after its last step" in stall.describe() and "last work was" in stall.describe()


def test_a_finished_request_is_not_watched_any_more(setup):
    watch, path, clock = setup
    watch.expect(["0", "1"])
    clock.advance(1)
    step(path, "0-aa", "1-bb")
    write(path, "finished", requests=["1-bb"])
    assert watch.poll() is None
    for _ in range(5):
        clock.advance(4)
        step(path, "0-aa")
        assert watch.poll() is None  # 1 is done: its quiet 20 s are no stall
    watch.done("0")
    clock.advance(60)
    assert watch.poll() is None


def test_front_end_events_are_no_progress_and_a_half_written_line_waits(setup):
    watch, path, clock = setup
    watch.expect(["0"])
    write(path, "mm_cache", hash="x", hit=False)
    with open(path, "a") as f:
        f.write('{"event": "step", "tokens": {"0-aa": 1}')  # its writer is still at it
    clock.advance(11)
    assert watch.poll().request == "0"
    with open(path, "a") as f:
        f.write("}\n")
    clock.advance(POLL_S)
    assert watch.poll() is None  # the completed line is read, and counts from when it was seen


def test_an_engine_is_watched_only_with_a_stall_bound_and_observations(tmp_path):
    from harness.engines.base import Engine
    engine = Engine("x", None, request_timeout=600)
    engine.stall_s = 10
    assert engine._watch() is None  # a remote server: its requests have only their timeout
    path = tmp_path / "observe.jsonl"
    path.touch()
    engine.observations = Observations(path)
    assert engine._watch() is not None
    engine.stall_s = None
    assert engine._watch() is None
