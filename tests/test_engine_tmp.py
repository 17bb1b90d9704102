"""An engine's temporary files (vLLM's ZMQ sockets, torch.distributed's
store files) go into a folder of its own, which goes with the engine: on
teardown, when the harness dies (its reaper), and on the next run's reaping.
Its compile cache stays where torch puts it, shared across starts."""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.engines import procs

# What an engine does with the temporary folder: vLLM's socket and store files.
WRITES_TMP = ("import os, sys, tempfile, time\n"
              "d = tempfile.gettempdir()\n"
              "open(os.path.join(d, 'vllm_dist_x'), 'w').close()\n"
              "print(d, os.environ.get('TORCHINDUCTOR_CACHE_DIR'), flush=True)\n"
              "time.sleep(300)\n")


def _launch(tmp_path, monkeypatch, env=None):
    monkeypatch.setattr(procs, "PIDFILE_DIR", tmp_path / "pids")
    log = tmp_path / "engine.log"
    proc = procs.launch([sys.executable, "-c", WRITES_TMP], dict(os.environ) | (env or {}), log, tmp_path)
    deadline = time.monotonic() + 20
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc, log.read_text().split()


def test_engine_writes_into_its_own_folder_and_teardown_removes_it(tmp_path, monkeypatch):
    proc, (folder, inductor) = _launch(tmp_path, monkeypatch)
    assert Path(folder) == proc.tmp and Path(folder).name.startswith(procs.ENGINE_TMP_PREFIX)
    assert (Path(folder) / "vllm_dist_x").exists()
    assert Path(inductor).parent == Path(tempfile.gettempdir())  # the shared compile cache
    assert proc.terminate(grace=5) == []
    assert not Path(folder).exists()


def test_a_compile_cache_the_engine_was_given_is_kept(tmp_path, monkeypatch):
    proc, (_, inductor) = _launch(tmp_path, monkeypatch, {"TORCHINDUCTOR_CACHE_DIR": "/somewhere/inductor"})
    proc.terminate(grace=5)
    assert inductor == "/somewhere/inductor"


def test_the_reaper_removes_the_folder_when_the_harness_is_gone(tmp_path, monkeypatch):
    proc, (folder, _) = _launch(tmp_path, monkeypatch)
    proc.reaper.stdin.close()  # what the harness's death does to the reaper's pipe
    proc.reaper.wait(timeout=20)
    assert proc.popen.wait(timeout=5) != 0
    assert not Path(folder).exists()


def test_the_next_run_removes_the_folder_a_dead_harness_left(tmp_path, monkeypatch):
    monkeypatch.setattr(procs, "PIDFILE_DIR", tmp_path)
    left = Path(tempfile.mkdtemp(prefix=procs.ENGINE_TMP_PREFIX))
    (left / "sock").touch()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "1.json").write_text(json.dumps({"pgid": gone.pid, "harness_pid": gone.pid,
                                                 "harness_started": 0.0, "tmp": str(left)}))
    procs.reap_stale()
    assert not left.exists()
