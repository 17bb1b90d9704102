"""Where each engine of a run computes, across its pytest-xdist workers:
the engine pool asks (harness.engines.placement) and this plans.

- GPU tier (`GpuLeases`): each engine leases GPUs of its own from the run's
  device ledger (harness.engines.devices), making room first by retiring
  the pool's least recently used engine; a card's ballast leases a whole GPU.
- CPU tier (`CpuTurn`): the same ledger over the engine turn's slots, one per
  worker up to one per core, each slot a share of the cores (`slot_cores`).
  A worker holds a slot while any engine of its own is up or starting, and
  every slot for a module marked `alone` (timings no other worker's engine
  may disturb). Beside another worker, a TP 1 engine computes on the first
  core of its slots; a TP engine keeps the runner's placement, a core per
  rank, and gets a longer grace to exit (`TP_SHUTDOWN_GRACE_S`).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from harness.engines.devices import DeviceLedger, Lease, run_devices
from harness.engines.parallel import BIND_ENV, tensor_parallel
from harness.engines.placement import Placement, Unplaced

# vLLM's wait for its workers to exit before it terminates them (default 5 s;
# a tree that exits sooner is not waited for), for every TP engine on the CPU
# tier; under the pool's RETIRE_GRACE_S. Beside another worker's engine,
# ranks outlast 5 s and leave their /dev/shm segments behind, and a pool
# cannot see every engine beside it (a test's own run of the vision LoRA
# family, TP 1/2/4, beside the other worker's).
SHUTDOWN_GRACE_ENV = "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"
TP_SHUTDOWN_GRACE_S = 20


def run_ledger(run_dir: Path, tier: str, workers: int = 1) -> DeviceLedger | None:
    """The run's ledger: its GPUs on the GPU tier (None where NVML sees
    none: nothing to schedule), the engine turn on the CPU tier, a slot
    for each of the run's `workers` up to one per core."""
    if tier != "gpu":
        slots = max(1, min(workers, len(os.sched_getaffinity(0))))
        return DeviceLedger.turn(Path(run_dir) / "engine-turn.json", slots)
    devices = run_devices()
    return DeviceLedger(Path(run_dir) / "devices.json", devices) if devices else None


def run_placement(run_dir: Path, tier: str, workers: int = 1) -> Placement:
    """A worker's placement over the run's ledger."""
    return for_tier(tier, run_ledger(run_dir, tier, workers))


def for_tier(tier: str, ledger: DeviceLedger | None = None) -> Placement:
    """The tier's placement over `ledger`; without one on the GPU tier, none."""
    if tier == "gpu":
        return GpuLeases(ledger) if ledger is not None else Unplaced()
    return CpuTurn(ledger)


def slot_cores(slots: list[int], total: int, cores: list[int] | None = None) -> list[int]:
    """The cores of these engine-turn slots, of `total`: the machine's cores
    cut into `total` equal shares (with fewer cores than slots, slots share
    cores in turn)."""
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    if len(cores) < total:
        return sorted({cores[s % len(cores)] for s in slots})
    per = len(cores) // total
    return [c for s in sorted(slots) for c in cores[s * per:(s + 1) * per]]


class CpuTurn:
    """The CPU tier: this worker's slots of the engine turn (none without a
    ledger: the machine's default placement), taken for its first engine
    and given back when it has none."""

    def __init__(self, ledger: DeviceLedger | None):
        self.ledger = ledger
        # This module's engines need every slot (set per module by the engines plugin).
        self.alone = False
        self._turn: list[Lease] = []
        self._lock = threading.Lock()  # (starts ahead take the turn from their own threads)

    def devices_for(self, label: str, gpus: int, make_room: Callable[[], bool]) -> Lease | None:
        if self.ledger is not None:
            with self._lock:
                need = len(self.ledger.devices) if self.alone else 1
                held = sum(len(t.devices) for t in self._turn)
                if held < need:
                    self._turn.append(self.ledger.acquire(need - held, f"engines of pid {os.getpid()}"))
        return None

    def env(self, spec) -> dict[str, str]:
        """A TP engine: the longer grace to exit. A TP 1 engine beside
        another worker: the first core of this worker's slots, one core as
        every rank of the tier (harness.engines.parallel). Nothing else
        when the worker holds every slot, as a run of one worker does."""
        if tensor_parallel(spec.args) > 1:
            return {SHUTDOWN_GRACE_ENV: str(TP_SHUTDOWN_GRACE_S)}
        slots = sorted(d for turn in self._turn for d in turn.devices)
        if not slots or len(slots) == len(self.ledger.devices):
            return {}
        return {BIND_ENV: str(slot_cores(slots, len(self.ledger.devices))[0])}

    def idle(self) -> None:
        with self._lock:
            turns, self._turn = self._turn, []
        for turn in turns:
            self.ledger.release(turn)

    def card_lease(self, holder: str, make_room: Callable[[], bool]) -> Lease | None:
        return None

    def release(self, lease: Lease, lost: dict[int, str]) -> None:
        self.ledger.release(lease, lost=lost)


class GpuLeases:
    """The GPU tier: each engine's own GPUs, and a card's, from the run's ledger."""

    alone = False

    def __init__(self, ledger: DeviceLedger):
        self.ledger = ledger

    def devices_for(self, label: str, gpus: int, make_room: Callable[[], bool]) -> Lease | None:
        return self.ledger.acquire(gpus, label, make_room=make_room)

    def env(self, spec) -> dict[str, str]:
        return {}

    def idle(self) -> None:
        pass

    def card_lease(self, holder: str, make_room: Callable[[], bool]) -> Lease | None:
        return self.ledger.acquire(1, holder, make_room=make_room)

    def release(self, lease: Lease, lost: dict[int, str]) -> None:
        self.ledger.release(lease, lost=lost)
