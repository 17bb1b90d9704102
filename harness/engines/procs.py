"""Engine processes: launch in their own group, watch, and tear down for sure.

Three layers keep an engine from outliving the harness:
  1. teardown: SIGTERM to the group, SIGKILL after a bound, then verify;
  2. a reaper process per engine that kills the group when the harness dies;
  3. a pidfile per engine, so the next run reaps what a crashed run left.
Each engine gets a temporary folder of its own (TMPDIR): vLLM's ZMQ sockets
and torch.distributed's store files go there, and go with the engine (in
/tmp they stayed behind, some ten per start).
"""
from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from harness.memory.samplers.process_tree import descendants

ROOT = Path(__file__).resolve().parents[2]
PIDFILE_DIR = Path(os.environ.get("MMHARNESS_RUNTIME", ROOT / ".cache" / "engines"))
REAPER = Path(__file__).with_name("reaper.py")
# How long a killed leader's resource tracker gets to unlink what it registered.
TRACKER_CLEANUP_S = 5.0
# An engine's temporary folder, named after the harness process that made it.
ENGINE_TMP_PREFIX = "mmh-engine-"


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and _alive(p):
                out.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return out


@dataclass
class EngineProcess:
    popen: subprocess.Popen
    log_path: Path
    pidfile: Path
    reaper: subprocess.Popen
    tmp: Path | None = None  # the engine's TMPDIR, removed once its tree is gone
    # Every descendant ever seen: teardown also kills ones that left the group.
    seen: dict[int, psutil.Process] = field(default_factory=dict)
    # Descendants whose death means the engine is dead (set once it is ready).
    vital: dict[int, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def refresh_children(self) -> list[psutil.Process]:
        # Every second while a request waits: /proc's children files, not
        # psutil's scan of all of /proc, which holds the GIL from the sampler.
        kids = []
        for pid in descendants(self.pid):
            try:
                kids.append(self.seen.get(pid) or psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
            self.seen.setdefault(pid, kids[-1])
        return kids

    def mark_vital(self) -> None:
        """Call when ready: from now on, any of these processes dying is a crash."""
        self.vital = {self.pid: "engine"}
        for k in self.refresh_children():
            try:
                self.vital[k.pid] = k.name()
            except psutil.NoSuchProcess:
                continue

    def death(self) -> tuple[int | None, str] | None:
        """None while alive; else (returncode of the leader or None, what died)."""
        rc = self.popen.poll()
        if rc is not None:
            return rc, "engine process"
        for pid, name in self.vital.items():
            if pid == self.pid:
                continue
            p = self.seen.get(pid)
            if p is None or not _alive(p):
                return None, f"{name} (pid {pid})"
        return None

    def terminate(self, grace: float = 10.0, kill_wait: float = 10.0) -> list[int]:
        """Stop the whole tree. Returns pids that survived (should be empty)."""
        self.refresh_children()
        _killpg(self.pid, signal.SIGTERM)
        self._wait_gone(grace)
        if self.popen.poll() is None:
            # The leader alone first: its multiprocessing resource tracker,
            # left alive, unlinks the shared memory the engine registered
            # once the leader is gone (SIGKILL to the whole group left it all
            # in /dev/shm).
            self.popen.kill()
            self._wait_gone(TRACKER_CLEANUP_S)
        _killpg(self.pid, signal.SIGKILL)
        for p in self._seen_alive():  # descendants that left the group
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self._wait_gone(kill_wait)
        survivors = sorted({p.pid for p in self._remaining()})
        self._release_reaper()
        if not survivors:
            self.pidfile.unlink(missing_ok=True)
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
        return survivors

    def _remaining(self) -> list[psutil.Process]:
        return group_members(self.pid) + self._seen_alive()

    def _wait_gone(self, timeout: float) -> None:
        """Reap the leader, then wait until nothing of the tree is left."""
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._remaining():
            time.sleep(0.1)

    def _seen_alive(self) -> list[psutil.Process]:
        return [p for p in self.seen.values() if _alive(p)]

    def _release_reaper(self) -> None:
        try:
            self.reaper.stdin.close()
            self.reaper.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.reaper.kill()


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _with_own_tmp(env: dict[str, str], tmp: Path) -> dict[str, str]:
    """env with TMPDIR the engine's own folder; torch's compile cache stays
    where it was (under the shared temporary folder, unless env moves it), or
    every start would compile again."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    user = re.sub(r"[\\/:*?\"<>|]", "_", user)  # as torch's default_cache_dir names it
    inductor = str(Path(tempfile.gettempdir()) / f"torchinductor_{user}")
    # Appended, not put first: vLLM's processes then failed to take their
    # titles (setproctitle), VLLM::EngineCore stayed "python", and the
    # harness could not tell its engine core apart.
    out = env | {"TMPDIR": str(tmp)}
    out.setdefault("TORCHINDUCTOR_CACHE_DIR", inductor)
    return out


def launch(cmd: list[str], env: dict[str, str], log_path: Path, cwd: Path) -> EngineProcess:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{ENGINE_TMP_PREFIX}{os.getpid()}-"))
    with open(log_path, "ab", buffering=0) as log:
        popen = subprocess.Popen(cmd, env=_with_own_tmp(env, tmp), stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd)
    reaper = subprocess.Popen([sys.executable, str(REAPER), str(popen.pid), str(tmp)],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    PIDFILE_DIR.mkdir(parents=True, exist_ok=True)
    pidfile = PIDFILE_DIR / f"{popen.pid}.json"
    pidfile.write_text(json.dumps({
        "pgid": popen.pid, "harness_pid": os.getpid(),
        "harness_started": psutil.Process().create_time(),
        "engine_started": started_at(popen.pid), "cmd": cmd[:6], "log": str(log_path), "tmp": str(tmp)}))
    return EngineProcess(popen=popen, log_path=log_path, pidfile=pidfile, reaper=reaper, tmp=tmp)


def started_at(pid: int) -> float | None:
    """The process's start time; None when there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def reap_stale() -> list[int]:
    """Kill engine groups whose harness is gone. Returns the pgids reaped."""
    reaped = []
    for f in sorted(PIDFILE_DIR.glob("*.json")) if PIDFILE_DIR.is_dir() else []:
        try:
            info = json.loads(f.read_text())
        except (OSError, ValueError):
            f.unlink(missing_ok=True)
            continue
        harness_alive = started_at(info["harness_pid"]) == info["harness_started"]
        if harness_alive:
            continue
        members = group_members(info["pgid"])
        if members:
            _killpg(info["pgid"], signal.SIGKILL)
            reaped.append(info["pgid"])
        if info.get("tmp") and Path(info["tmp"]).name.startswith(ENGINE_TMP_PREFIX):
            shutil.rmtree(info["tmp"], ignore_errors=True)
        f.unlink(missing_ok=True)
    return reaped
