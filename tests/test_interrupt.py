"""Ctrl-C during `make run`: the engines stop, the run exits within 10 s
with no traceback, and nothing the run started survives it."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
EXIT_BOUND_S = 10.0

pytestmark = pytest.mark.engine


def ctrl_c_as_in_a_terminal() -> None:
    """A job started with `&` by a non-interactive shell inherits SIGINT
    ignored, and Python then installs no KeyboardInterrupt handler: restore
    the default a terminal gives, so the run under test sees Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigint_while_an_engine_starts_stops_everything_within_bound(tmp_path):
    env = {**os.environ, "MMHARNESS_RUNTIME": str(tmp_path / "runtime")}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "scenarios/test_encoder_memory.py", "-q",
                             "--results-dir", str(tmp_path / "run"), "--history", str(tmp_path / "h.jsonl")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 120
    # Wait until the engine process is up and loading (its log has lines).
    while not any(p.stat().st_size for p in (tmp_path / "run" / "engines").glob("*.log")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()[-3000:]
        for child in psutil.Process(proc.pid).children(recursive=True):
            seen.setdefault(child.pid, child)
        time.sleep(0.2)
    time.sleep(2)
    for child in psutil.Process(proc.pid).children(recursive=True):
        seen.setdefault(child.pid, child)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert took < EXIT_BOUND_S, f"exit took {took:.1f} s\n{out[-3000:]}"
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run"]["complete"] is False and "interrupted" in results["run"]["incomplete_reason"]
    assert "INCOMPLETE" in out
    time.sleep(0.5)
    survivors = [p.pid for p in seen.values() if _alive(p)]
    assert seen and not survivors, f"survived the run: {survivors}"
