"""OfflineEngine's protocol edges against a stub worker (no engine, seconds)."""
import os
import signal

import pytest

from harness.checks.verdicts import Cause
from harness.engines import offline
from harness.engines.base import Sampling
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import Completion, EngineCrashed
from harness.workloads.chat import user

STUB = __import__("pathlib").Path(__file__).with_name("_stub_offline_worker.py")


@pytest.fixture
def stub_engine(monkeypatch, interpreter, tmp_path):
    monkeypatch.setattr(offline, "WORKER", STUB)
    engine = OfflineEngine("no-model", {}, interpreter, tmp_path / "engine.log").start()
    yield engine
    engine.close(grace=1)


def test_worker_dead_between_requests_is_a_crash_verdict(stub_engine):
    [first] = stub_engine.chat([user("hello")], Sampling(max_tokens=1))
    assert isinstance(first, Completion)
    os.kill(stub_engine.proc.pid, signal.SIGKILL)
    stub_engine.proc.popen.wait(10)
    results = stub_engine.chat([user("again"), user("and again")], Sampling(max_tokens=1))
    assert [type(r) for r in results] == [EngineCrashed, EngineCrashed], results
    assert results[0].cause == Cause.ENGINE_DEAD and results[0].signal == "SIGKILL"
    assert "offline worker died" in results[0].detail
