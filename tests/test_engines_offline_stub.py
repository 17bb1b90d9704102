"""OfflineEngine's protocol edges against a stub worker (no engine, seconds)."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.verdicts import Cause
from harness.engines import offline
from harness.engines.base import Sampling
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import Completion, EngineCrashed
from harness.workloads.chat import user

STUB = Path(__file__).with_name("_stub_offline_worker.py")


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


def test_a_hung_engine_fails_the_alive_check_within_its_bound(stub_engine, monkeypatch):
    """The alive check waits ALIVE_TIMEOUT_S, not the request bound (600 s):
    an engine that never answers is a timeout within it, and is given up."""
    from harness.verdicts import CheckFailure
    from harness.engines import base

    monkeypatch.setattr(base, "ALIVE_TIMEOUT_S", 2.0)
    monkeypatch.setattr(stub_engine, "chat", _as_hang(stub_engine.chat))
    started = time.monotonic()
    with pytest.raises(CheckFailure) as failure:
        stub_engine.assert_alive()
    assert failure.value.cause == Cause.TIMEOUT, failure.value
    assert time.monotonic() - started < 2.0 + 5  # the verdict does not wait for the tear-down
    assert stub_engine.request_timeout == 600  # the bound held for the alive check only


def _as_hang(chat):
    """The alive check's request, worded so that the stub never answers it."""
    return lambda conversations, sampling, **kw: chat([[{"role": "user", "content": "hang"}]], sampling, **kw)


def test_the_start_up_socket_folder_goes_once_the_worker_is_accepted(stub_engine):
    mine = list(Path(tempfile.gettempdir()).glob(f"{offline.SOCKET_DIR_PREFIX}{os.getpid()}-*"))
    assert mine == [] and stub_engine.ready


def test_socket_folders_of_killed_harnesses_are_removed_and_live_ones_kept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    folders = {name: tmp_path / f"{offline.SOCKET_DIR_PREFIX}{name}" for name in
               (f"{gone}-abc", f"{os.getpid()}-def", "legacyempty", "legacyfull")}
    for folder in folders.values():
        folder.mkdir()
    (folders["legacyfull"] / "conn.sock").write_text("")
    removed = offline.remove_stale_socket_dirs(tmp_path)
    assert sorted(removed) == sorted([folders[f"{gone}-abc"], folders["legacyempty"]])
    assert folders[f"{os.getpid()}-def"].exists() and folders["legacyfull"].exists()
