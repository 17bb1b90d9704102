"""kill_core_during's killer, a process of its own, against stand-in
engines: it kills the core once one step holds the whole batch and not
before; a batch that ends first is an error, with the core left alive and
no killer left behind."""
import json
import subprocess
import time
from types import SimpleNamespace

import psutil
import pytest

from harness.verdicts import Cause
from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.observations import Observations
from harness.engines.outcomes import Completion, EngineCrashed

BATCH = [[{"role": "user", "content": f"x {i}"}] for i in range(3)]


class StandInEngine:
    """A `sleep` as its core; its chat writes the steps it is given, then
    answers crashed if the core died within a few seconds, else completed."""

    def __init__(self, observed: Observations, steps: list[int], pause_s: float = 0.5):
        self.core = subprocess.Popen(["sleep", "120"])
        self.proc = SimpleNamespace(vital={self.core.pid: "VLLM::EngineCore"})
        self.observations, self.steps, self.pause_s = observed, steps, pause_s
        self.alive_before_full_step: list[bool] = []

    def chat(self, conversations, sampling):
        for size in self.steps:
            time.sleep(self.pause_s)
            self.alive_before_full_step.append(self.core.poll() is None)
            if self.observations.path is not None:
                with open(self.observations.path, "a") as f:
                    f.write(json.dumps({"event": "step", "requests": size}) + "\n")
        try:
            self.core.wait(timeout=5)
            return [EngineCrashed(cause=Cause.ENGINE_DEAD)] * len(conversations)
        except subprocess.TimeoutExpired:
            return [Completion(text="", token_ids=[1])] * len(conversations)

    def close(self):
        self.core.kill()
        self.core.wait()


@pytest.fixture
def observed(tmp_path):
    path = tmp_path / "observe.jsonl"
    path.touch()
    return Observations(path)


def killers() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if "harness.engines.core_killer" in " ".join(p.cmdline())]


def test_the_core_is_killed_once_one_step_holds_the_whole_batch(observed):
    engine = StandInEngine(observed, steps=[1, 2, 3])
    try:
        results, verdict_s = kill_core_during(engine, BATCH, Sampling(max_tokens=8))
    finally:
        engine.close()
    assert engine.alive_before_full_step == [True, True, True]  # not at the steps of 1 and 2
    assert all(isinstance(r, EngineCrashed) for r in results)
    assert engine.core.returncode == -9 and 0 <= verdict_s < 5, (engine.core.returncode, verdict_s)
    assert killers() == []


def test_unobserved_the_core_is_killed_after_the_delay(tmp_path):
    engine = StandInEngine(Observations(None), steps=[])
    try:
        started = time.monotonic()
        results, _ = kill_core_during(engine, BATCH, Sampling(max_tokens=8), delay_s=0.3)
    finally:
        engine.close()
    assert engine.core.returncode == -9 and time.monotonic() - started >= 0.3
    assert all(isinstance(r, EngineCrashed) for r in results)


def test_a_batch_that_ends_before_the_kill_is_an_error_and_leaves_the_core_be(observed):
    engine = StandInEngine(observed, steps=[1, 2])  # never all three in one step
    try:
        with pytest.raises(RuntimeError, match="the batch ended before the kill.*Completion.*make it longer"):
            kill_core_during(engine, BATCH, Sampling(max_tokens=8))
        assert engine.core.poll() is None  # no kill comes later either
        assert killers() == []
    finally:
        engine.close()
