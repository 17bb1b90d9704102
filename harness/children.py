"""Child processes that go when the harness command goes.

A long command (an engine venv's pip, a bisect step's pytest) runs in a
session of its own, so a Ctrl-C in the terminal reaches it once, through
us: on an interrupt (Ctrl-C, or a SIGTERM that `sigterm_interrupts` turned
into one) or a timeout the child gets SIGINT and `grace` seconds to wind
down (pytest tears its engines down, pip removes what it half wrote), then
SIGKILL. Nothing outlives the command.
"""
from __future__ import annotations

import signal
import subprocess

GRACE_S = 30.0


def run_child(cmd: list[str], *, timeout: float, grace: float = GRACE_S, input: str | None = None,
              **popen) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, input=input, capture_output=True, text=True,
    timeout=timeout), stopping the child as above if we are interrupted or
    time out."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=None if input is None else subprocess.PIPE,
                            start_new_session=True, **popen)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except BaseException:
        stop_child(proc, grace)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def stop_child(proc: subprocess.Popen, grace: float) -> None:
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
    finally:  # also when a second interrupt cuts the grace short
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sigterm_interrupts() -> None:
    """SIGTERM (a CI job cancelled, `kill`) ends the command as Ctrl-C does,
    through its clean-up, instead of leaving its children running."""
    signal.signal(signal.SIGTERM, _interrupt)
