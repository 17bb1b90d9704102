"""Which engine start-up failures are worth one more try: only those of the
infrastructure, never the engine's own.

- memory not yet free: vLLM refuses to start when the device's free memory
  is below its budget (vllm/v1/worker/utils.py, "Free memory on device ...
  on startup is less than ..."), as when the previous engine's memory is
  still being freed;
- a port race: the port chosen free was taken before the server bound it
  ("address already in use", torch.distributed's EADDRINUSE).

An OOM, a crash, an illegal instruction or a start-up that timed out is a
finding, and is never retried; a mismatch is a check's verdict, never a
start-up failure. The pool retries at most once and keeps every attempt
(harness.engines.pool).
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.verdicts import Cause
from harness.engines.outcomes import EngineCrashed

MEMORY_NOT_FREE = ("free memory on device", "on startup is less than")
PORT_TAKEN = ("address already in use", "eaddrinuse")
# A stopped engine's device memory takes seconds to come back.
MEMORY_WAIT_S = 10.0


@dataclass(frozen=True)
class Retry:
    reason: str       # "memory not yet free" | "port race"
    delay_s: float    # wait this long before the next attempt


def retry_for(crash: EngineCrashed) -> Retry | None:
    """The retry a start-up failure deserves, or None: never one for a
    failure the classifier gave a cause of its own (OOM, SIGILL, timeout)."""
    if crash.cause != Cause.STARTUP_FAILED:
        return None
    text = "\n".join([crash.detail, *crash.log_tail]).lower()
    if any(words in text for words in PORT_TAKEN):
        return Retry("port race", 0.0)
    if all(words in text for words in MEMORY_NOT_FREE):
        return Retry("memory not yet free", MEMORY_WAIT_S)
    return None
