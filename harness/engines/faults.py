"""Fault injection: kill an engine's core process while a batch is in flight,
and the in-engine fault switches (harness/compat/site/mmharness_faults.py)
that make an engine misbehave like a real bug, for the harness's own tests."""
from __future__ import annotations

import time
from pathlib import Path

from harness.engines.base import Engine, Sampling
from harness.engines.outcomes import Result
from harness.engines.punctual import Punctual

FAULTS_ENV = "MMHARNESS_FAULTS"
SCALE_ENV = "MMHARNESS_FAULT_SCALE"
# Faults that act in the first engine they change something in only, and
# the folder of their claims (harness/compat/site/mmharness_fault_once.py).
ONCE_ENV = "MMHARNESS_FAULTS_ONCE"
MARKERS_ENV = "MMHARNESS_FAULT_MARKERS"
# The switches the engine-side shim knows; see mmharness_faults.FAULTS.
FAULT_NAMES = ("padding-leak", "single-request-steps", "raise-ragged-audio",
               "reference-cache", "reject-8khz", "chunk-from-total",
               "vision-chunk-leak", "lora-ignore-vision-mlp", "media-cross", "base-under-adapter",
               "stop-admitting", "spin-request", "keep-encoder-outputs", "slow-steps",
               "processor-cache-cross", "abort-keeps-a-block", "resume-repeats-token")


# How long the kill waits for the batch to be seen in one step.
IN_FLIGHT_BOUND_S = 60.0


def fault_env(*names: str, scale: float | None = None, once: tuple[str, ...] = (),
              markers: Path | None = None) -> dict[str, str]:
    """Engine environment that switches the named faults on (env= of an engine
    or of EnginePool.get); `scale`: the leaks' size in standard deviations
    of the embedding they perturb (the shim's default is 1); `once`: those
    of them that act in one engine only, the first they change something
    in, claimed by a marker in the folder `markers` (a failed check's
    rerun on fresh engines meets them no more)."""
    unknown = [n for n in names if n not in FAULT_NAMES]
    if unknown:
        raise ValueError(f"unknown fault(s) {unknown}; known: {list(FAULT_NAMES)}")
    if scale is not None and not scale >= 0:
        raise ValueError(f"fault scale must be a number >= 0, got {scale}")
    if set(once) - set(names) or (once and markers is None):
        raise ValueError(f"faults acting once must be among those switched on {list(names)}, with a folder "
                         f"for their markers: got {list(once)}")
    return {FAULTS_ENV: ",".join(names), **({SCALE_ENV: repr(float(scale))} if scale is not None else {}),
            **({ONCE_ENV: ",".join(once), MARKERS_ENV: str(markers)} if once else {})}


def engine_core_pid(engine: Engine) -> int:
    return next(pid for pid, name in engine.proc.vital.items() if "EngineCore" in name)


def kill_core_during(engine: Engine, conversations: list, sampling: Sampling,
                     delay_s: float = 1.0) -> tuple[list[Result], float]:
    """SIGKILL the engine core while the batch is in flight: as soon as a
    step holding every request of it was observed, where the engine is
    observed (under load, a fixed delay can pass before all of them reached
    the core; on a fast host the batch can end within it), else `delay_s`
    into the batch. The killer is a process of its own: a kill thread in
    the harness missed a 3-second batch (harness.engines.punctual). Returns
    the batch's results and the seconds from the kill to the verdict."""
    observed = engine.observations.path
    killer = Punctual("harness.engines.core_killer", {
        "pid": engine_core_pid(engine), "observations": observed and str(observed),
        "offset": engine.observations.mark(), "requests": len(conversations), "delay_s": delay_s,
        "timeout_s": IN_FLIGHT_BOUND_S})
    try:
        results = engine.chat(conversations, sampling)
    finally:
        ended = time.monotonic()
        kill = killer.stop()  # it said when it killed as it did
    if not kill or kill["killed_at"] is None or kill["killed_at"] > ended:
        raise RuntimeError(f"the batch ended before the kill (its outcomes: {[type(r).__name__ for r in results]}; "
                           f"the killer's: {kill}): make it longer")
    return results, ended - kill["killed_at"]
