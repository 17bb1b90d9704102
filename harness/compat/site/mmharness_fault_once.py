"""Faults that act in one engine only: the first engine where the fault
changes something claims it, and every later engine (a failed check's rerun
on fresh engines) runs clean. For the flaky verdict's tests.

MMHARNESS_FAULTS_ONCE=name[,name...] names them among MMHARNESS_FAULTS;
MMHARNESS_FAULT_MARKERS=<folder> holds one marker file per fault, naming
the engine that claimed it: the claim outlives that engine, and every
process of the engine (its TP ranks) finds its own name there. An engine is
named by its observation file (MMHARNESS_OBSERVE), one per engine start.

Only faults that act on encoder calls act once: a claim is made where one
changed an encoder call's outputs or raised in it.
"""
from __future__ import annotations

import os
from pathlib import Path

import mmharness_encoder

ONCE_ENV = "MMHARNESS_FAULTS_ONCE"
MARKERS_ENV = "MMHARNESS_FAULT_MARKERS"


def names() -> set[str]:
    return {n.strip() for n in os.environ.get(ONCE_ENV, "").split(",") if n.strip()}


def arm(name: str, arm_fault) -> None:
    """Arm a fault with its encoder-call functions gated by the claim."""
    before, after = len(mmharness_encoder.BEFORE), len(mmharness_encoder.AFTER)
    arm_fault()
    if len(mmharness_encoder.BEFORE) == before and len(mmharness_encoder.AFTER) == after:
        raise ValueError(f"{ONCE_ENV}: {name} does not act on encoder calls, so it cannot act once")
    mmharness_encoder.BEFORE[before:] = [_gated_before(name, f) for f in mmharness_encoder.BEFORE[before:]]
    mmharness_encoder.AFTER[after:] = [_gated_after(name, f) for f in mmharness_encoder.AFTER[after:]]


def _gated_before(name: str, before):
    def gated(call) -> None:
        try:
            before(call)
        except Exception:
            if _claimed(name):
                raise
    return gated


def _gated_after(name: str, after):
    def gated(call, outputs):
        changed = after(call, outputs)
        untouched = changed is outputs or (len(changed) == len(outputs)
                                           and all(a is b for a, b in zip(changed, outputs)))
        return outputs if untouched or not _claimed(name) else changed
    return gated


def _claimed(name: str) -> bool:
    """Whether this engine acts the fault out: it is the first to claim it,
    or the one that did. The marker is written whole (linked from a file of
    this process's), so no engine reads a half-written name."""
    me = os.environ.get("MMHARNESS_OBSERVE") or f"pid {os.getpid()}"
    marker = Path(os.environ[MARKERS_ENV]) / name
    marker.parent.mkdir(parents=True, exist_ok=True)
    mine = marker.with_name(f".{name}.{os.getpid()}")
    mine.write_text(me, encoding="utf-8")
    try:
        os.link(mine, marker)
    except FileExistsError:
        pass
    finally:
        mine.unlink()
    return marker.read_text(encoding="utf-8") == me
