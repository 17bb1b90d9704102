"""Children that must act on time beside a CPU engine: the client that
leaves a request mid-stream (harness.engines.leaving) and the core killer
(harness.engines.core_killer).

Why processes: the harness's threads share one GIL, and on the CPU tier the
engine's spinning OpenMP threads keep a normal-priority thread waiting for
a core for hundreds of milliseconds. A leaving client in a harness thread
was seen, alone on the machine, to read its request's second step only
after the engine had run all its 280 tokens, in half a second, in half
the rounds: even at real-time priority, it waited for the GIL that
another harness thread held while waiting for a core. A kill thread that
polled for a step holding its whole batch missed a 3-second batch in CI,
beside the batch's six streaming threads. A process of its own has its own
GIL, and runs ahead of the engine where allowed (harness.priority).

The protocol: the parent writes the spec as JSON to the child's stdin; the
child asks to die with its parent, raises its priority, prints `ready`,
acts, and prints its outcome as one line of JSON.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Callable

from harness.children import stop_child
from harness.priority import raise_thread_priority

# What a child may take to start (its imports), a busy machine's worth.
START_S = 30.0
READY = "ready"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
# The harness's pid, for a child to tell whether its parent is still the one that started it.
PARENT_ENV = "MMHARNESS_PUNCTUAL_PARENT"


class Punctual:
    """`python -m module` acting on `spec`: started, and ready to act, once
    this returns. It runs in a session of its own (harness.children)."""

    def __init__(self, module: str, spec: dict):
        self.module = module
        self.proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, env={**os.environ, PARENT_ENV: str(os.getpid())})
        try:
            self.proc.stdin.write(json.dumps(spec))
            self.proc.stdin.close()
            self.proc.stdin = None  # else communicate() would flush the closed pipe
            ready = read_line(self.proc.stdout.fileno(), START_S).strip() == READY.encode()
        except BaseException:
            self.stop()
            raise
        if not ready:
            self.proc.kill()
            raise self._failed(f"was not ready within {START_S:.0f} s", self.proc.communicate()[1])

    def outcome(self, timeout_s: float) -> dict:
        """Its outcome, once it has acted (up to `timeout_s`)."""
        try:
            out, err = self.proc.communicate(timeout=timeout_s)
        except BaseException:
            stop_child(self.proc, grace=1.0)
            raise
        if self.proc.returncode != 0:
            raise self._failed(f"failed (exit {self.proc.returncode})", err)
        return json.loads(out)

    def stop(self) -> dict | None:
        """Stop it now; its outcome if it had acted already."""
        if self.proc.poll() is None:
            self.proc.kill()
        out, _ = self.proc.communicate()
        return json.loads(out) if out.strip() else None

    def _failed(self, what: str, stderr: str = "") -> RuntimeError:
        return RuntimeError(f"{self.module} {what}: {stderr[-2000:]}")


def read_line(fd: int, timeout_s: float) -> bytes:
    """One line from `fd` (b"" at its end, or what came within `timeout_s`),
    a byte at a time: a buffered read could take the outcome behind it,
    which communicate() then never sees, as it reads the pipe itself."""
    deadline = time.monotonic() + timeout_s
    line = b""
    while not line.endswith(b"\n") and select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


def serve(act: Callable[[dict], dict]) -> None:
    """The child's side: read the spec, get ready, act, print the outcome."""
    spec = json.load(sys.stdin)
    _die_with_parent()
    raise_thread_priority()
    print(READY, flush=True)
    print(json.dumps(act(spec)), flush=True)


def _die_with_parent() -> None:
    """A harness killed outright takes its punctual children with it: they
    run in a session of their own, out of reach of its process group
    (Linux's parent-death signal; elsewhere they end at their bound)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != int(os.environ.get(PARENT_ENV, os.getppid())):
        os._exit(1)  # it died before the signal was asked for
