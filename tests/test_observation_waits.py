"""The waits over the in-engine observer's file (harness.engines.observations):
until the scheduler is idle, until a request has run some steps, until
requests have run or ended. Over crafted files, each written before the
wait or while it waits."""
from __future__ import annotations

import json
import threading
import time

from harness.engines.observations import Observations


def observed(tmp_path, *events) -> Observations:
    path = tmp_path / "observe.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return Observations(path)


def append(obs: Observations, *events, after_s: float = 0.05) -> threading.Thread:
    def write():
        time.sleep(after_s)
        with open(obs.path, "a") as f:
            f.write("".join(json.dumps(e) + "\n" for e in events))
    thread = threading.Thread(target=write)
    thread.start()
    return thread


def step(*ids) -> dict:
    return {"event": "step", "tokens": {f"chatcmpl-{i}-ab12": 1 for i in ids}}


def held(running: int, waiting: int = 0) -> dict:
    return {"event": "held", "running": running, "waiting": waiting, "free_blocks": 7, "blocks": 7}


def test_idle_is_the_latest_held_event(tmp_path):
    # Idle once, then busy again in the same read: not idle yet.
    obs = observed(tmp_path, held(0), held(1))
    assert not obs.wait_idle(0, 0.2)
    writer = append(obs, held(0))
    assert obs.wait_idle(0, 5)
    writer.join()


def test_a_request_run_for_its_steps_and_not_another(tmp_path):
    obs = observed(tmp_path, step("mmh-a"), step("mmh-b"), step("mmh-ab"))
    assert not obs.wait_steps("mmh-a", 2, 0, 0.2)  # mmh-ab is another request
    writer = append(obs, step("mmh-a", "mmh-b"))
    assert obs.wait_steps("mmh-a", 2, 0, 5)
    writer.join()


def test_a_request_that_ended_first_was_not_run_for_its_steps(tmp_path):
    obs = observed(tmp_path, step("mmh-a"), {"event": "finished", "requests": ["chatcmpl-mmh-a-ab12"]},
                   step("mmh-a"))
    started = time.monotonic()
    assert not obs.wait_steps("mmh-a", 2, 0, 5)
    assert time.monotonic() - started < 1  # it says so at once, not at the bound


def test_a_wait_for_steps_stops_when_told(tmp_path):
    """`unless`: the leaving client's refusal read from its connection."""
    obs = observed(tmp_path, step("mmh-a"))
    asked = []
    started = time.monotonic()
    assert not obs.wait_steps("mmh-a", 2, 0, 5, unless=lambda: asked.append(1) or len(asked) >= 3)
    assert len(asked) == 3 and time.monotonic() - started < 1


def test_requests_run_or_ended(tmp_path):
    obs = observed(tmp_path, step("mmh-a"), {"event": "aborted", "requests": ["chatcmpl-mmh-c-ab12"]})
    assert obs.wait_all(["mmh-a", "mmh-c"], 0, 0.2, ended=False)
    assert not obs.wait_all(["mmh-a", "mmh-c"], 0, 0.2, ended=True)  # mmh-a still runs
    assert obs.wait_all([], 0, 0.2, ended=True)
    writer = append(obs, {"event": "finished", "requests": ["chatcmpl-mmh-a-ab12"]})
    assert obs.wait_all(["mmh-a", "mmh-c"], 0, 5, ended=True)
    writer.join()


def test_an_engine_not_observed_is_never_waited_for(tmp_path):
    obs = Observations(None)
    assert not obs.wait_idle(0, 5) and not obs.wait_steps("mmh-a", 1, 0, 5)
