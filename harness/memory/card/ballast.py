"""The ballast: a subprocess, owned by the harness, that holds device memory
so that exactly a card profile's capacity stays free for the engine.

    with Ballast(leave_free_bytes=profile.capacity_bytes, device=0) as ready:
        ...  # ready.pid, ready.free_bytes, ready.total_bytes

Readiness comes back as one JSON line over the child's stdout pipe; the
child holds its memory until its stdin closes. Teardown terminates it, kills
it if it lingers and verifies it is gone (BallastError otherwise).
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.memory.nvml import nvml_unavailable_reason

# Alone in its folder (runs under the engine's interpreter; see harness.engines.offline.WORKER).
CHILD_SCRIPT = Path(__file__).parent / "ballast_script" / "mmharness_ballast.py"
DEFAULT_TOLERANCE = 16 << 20


class BallastError(RuntimeError):
    pass


@dataclass(frozen=True)
class BallastReady:
    pid: int
    free_bytes: int       # device free memory once the ballast holds its share
    total_bytes: int
    allocated_bytes: int  # tensor bytes; its CUDA context comes on top


def emulation_unavailable_reason(python: str = sys.executable, nvml_module=None) -> str | None:
    """None if card emulation can run here, else why not (for pytest.skip).
    Only the harness's own interpreter is asked about torch; a separate
    ballast interpreter is checked when the ballast starts. `nvml_module`:
    pynvml by default (see harness.memory.nvml.Nvml)."""
    reason = nvml_unavailable_reason(nvml_module)
    if reason is not None:
        return f"card emulation needs NVML: {reason}"
    if python == sys.executable:
        try:
            import torch
        except ImportError:
            return "card emulation needs torch for the ballast, and it is not installed"
        if not torch.cuda.is_available():
            return f"card emulation needs torch with CUDA; torch {torch.__version__} sees no CUDA device"
    return None


class Ballast:
    """`device` is a CUDA ordinal; the child is started with
    CUDA_DEVICE_ORDER=PCI_BUS_ID so it matches the NVML index when
    CUDA_VISIBLE_DEVICES is unset. `env`: additions to the child's
    environment (the GPUs it may see, CUDA_VISIBLE_DEVICES)."""

    def __init__(self, leave_free_bytes: int, device: int = 0, *, python: str = sys.executable,
                 tolerance_bytes: int = DEFAULT_TOLERANCE, ready_timeout_s: float = 120.0,
                 env: dict[str, str] | None = None):
        self.leave_free_bytes = leave_free_bytes
        self.env = env or {}
        self.device = device
        self.python = python
        self.tolerance_bytes = tolerance_bytes
        self.ready_timeout_s = ready_timeout_s
        self.ready: BallastReady | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> BallastReady:
        env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", **self.env}
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # expandable segments would change the rounding
        self._proc = subprocess.Popen(
            [self.python, str(CHILD_SCRIPT), str(self.leave_free_bytes), str(self.device),
             str(self.tolerance_bytes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        line = self._read_line()
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            msg = {}
        if not msg.get("ready"):
            self._fail(f"ballast did not become ready: {msg.get('error') or line!r}")
        self.ready = BallastReady(msg["pid"], msg["free"], msg["total"], msg["allocated"])
        return self.ready

    def _read_line(self) -> str:
        assert self._proc and self._proc.stdout
        readable, _, _ = select.select([self._proc.stdout], [], [], self.ready_timeout_s)
        if not readable:
            self._fail(f"ballast sent nothing within {self.ready_timeout_s}s")
        return self._proc.stdout.readline()

    def _fail(self, message: str) -> None:
        assert self._proc
        self._proc.terminate()
        _, stderr = self._proc.communicate(timeout=30)
        self.stop()
        raise BallastError(f"{message}\n{(stderr or '')[-2000:]}")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Tear the ballast down and verify the process is gone."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
        if proc.returncode is None or _alive(proc.pid):
            raise BallastError(f"ballast process {proc.pid} survived teardown")

    def __enter__(self) -> BallastReady:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
