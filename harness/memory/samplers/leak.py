"""Leak check at engine teardown, within a bounded wait.

GPU tier: device used bytes (NVML) must come back to within a margin of the
baseline taken before the engine started, and no engine process survives.
Host tier: what the engine itself held must be gone: every process of its
tree, and the shared-memory segments it created in /dev/shm (within a
margin). The machine's available memory is not a measure of that: other
jobs on the machine move it by gigabytes.

Each check returns a LeakVerdict, leak or not: the caller turns a leak into
a record whose evidence holds the figures and the engine uses it served
(several, for a shared engine).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Sequence

import psutil

from harness.verdicts import Cause
from harness.memory.nvml import Nvml
from harness.units import MiB

from .process_tree import SeenProcess
from .shm import held_bytes

DEFAULT_GPU_MARGIN = 256 * MiB
# Segments are sparse; an engine's queues allocate a few MiB at most.
DEFAULT_SHM_MARGIN = 1 * MiB
DEFAULT_WAIT_S = 30.0


@dataclass
class Recovery:
    """How far one figure was from its baseline when the wait ended.
    `excess` is in the direction that means "memory still held"."""

    what: str
    baseline: int
    final: int
    excess: int
    margin: int
    waited_s: float
    # What still held the excess, where known (e.g. /dev/shm segment names).
    held_by: list[str] = field(default_factory=list)
    device: int | None = None  # the GPU (NVML index) this figure is of

    @property
    def returned(self) -> bool:
        return self.excess <= self.margin


def excess_held(baseline: int, now: int, *, higher_is_held: bool) -> int:
    """Bytes still held relative to baseline: for used memory a rise, for
    available memory a fall."""
    return now - baseline if higher_is_held else baseline - now


def wait_for_recovery(what: str, read: Callable[[], int], baseline: int, margin: int, *,
                      higher_is_held: bool, timeout_s: float = DEFAULT_WAIT_S,
                      poll_s: float = 0.25) -> Recovery:
    """Poll `read` until the excess is within margin or timeout_s passes."""
    start = time.monotonic()
    while True:
        now = read()
        excess = excess_held(baseline, now, higher_is_held=higher_is_held)
        waited = time.monotonic() - start
        if excess <= margin or waited >= timeout_s:
            return Recovery(what, baseline, now, excess, margin, round(waited, 3))
        time.sleep(poll_s)


def surviving(processes: Iterable[SeenProcess]) -> list[SeenProcess]:
    """Those processes still alive (same pid and same start time: a recycled
    pid belongs to someone else and does not count)."""
    alive = []
    for p in processes:
        try:
            proc = psutil.Process(p.pid)
            if abs(proc.create_time() - p.create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.Error:
            continue
    return alive


def wait_for_exit(processes: Sequence[SeenProcess], timeout_s: float, poll_s: float = 0.1
                  ) -> list[SeenProcess]:
    deadline = time.monotonic() + timeout_s
    alive = surviving(processes)
    while alive and time.monotonic() < deadline:
        time.sleep(poll_s)
        alive = surviving(alive)
    return alive


@dataclass
class LeakVerdict:
    """One engine's teardown: what came back, what did not, and who survived."""
    tier: str
    uses: list[str]
    recoveries: list[Recovery]
    survivors: list[SeenProcess] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.survivors and all(r.returned for r in self.recoveries)

    @property
    def unrecovered_devices(self) -> list[int]:
        """The GPUs whose memory did not come back."""
        return [r.device for r in self.recoveries if r.device is not None and not r.returned]

    @property
    def cause(self) -> Cause | None:
        return None if self.ok else Cause.LEAK

    @property
    def message(self) -> str:
        """What was held and who survived, naming the scenarios served; empty when ok."""
        if self.ok:
            return ""
        parts = [f"{r.what}: {r.excess / MiB:.1f} MiB over baseline after {r.waited_s:.1f}s "
                 f"(margin {r.margin / MiB:.0f} MiB)" + (f", held by {', '.join(r.held_by)}" if r.held_by else "")
                 for r in self.recoveries if not r.returned]
        parts += [f"process {p.pid} ({p.name}) survived teardown" for p in self.survivors]
        served = ", ".join(self.uses) or "no engine use named"
        return f"engine teardown (served: {served}): " + "; ".join(parts)

    def evidence(self) -> dict:
        return {
            "tier": self.tier,
            "uses": list(self.uses),
            "recoveries": [asdict(r) for r in self.recoveries],
            "survivors": [asdict(p) for p in self.survivors],
        }


# -- host tier ------------------------------------------------------------

def check_host_teardown(engine_processes: Iterable[SeenProcess], engine_segments: Iterable[str], *,
                        uses: Sequence[str] = (), margin_bytes: int = DEFAULT_SHM_MARGIN,
                        timeout_s: float = DEFAULT_WAIT_S) -> LeakVerdict:
    """After teardown: every process the engine's tree ever had is gone, and
    the /dev/shm segments it created ("name:inode") are removed, or hold no
    more than the margin."""
    start = time.monotonic()
    survivors = wait_for_exit(list(engine_processes), timeout_s)
    segments = list(engine_segments)
    left = max(timeout_s - (time.monotonic() - start), 0.0)
    recovery = wait_for_recovery("engine shared memory in /dev/shm",
                                 lambda: sum(held_bytes(segments).values()), 0, margin_bytes,
                                 higher_is_held=True, timeout_s=left)
    recovery.held_by = sorted(held_bytes(segments)) if not recovery.returned else []
    return LeakVerdict("host", list(uses), [recovery], survivors)


# -- GPU tier -------------------------------------------------------------

def gpu_baseline(devices: Iterable[int], nvml: Nvml | None = None) -> dict[int, int]:
    """Device used bytes per NVML index, to take before the engine starts."""
    own = nvml is None
    nvml = nvml or Nvml()
    try:
        return {i: nvml.memory(i).used for i in devices}
    finally:
        if own:
            nvml.close()


def check_gpu_teardown(baseline_used: dict[int, int], *, uses: Sequence[str] = (),
                       engine_processes: Iterable[SeenProcess] = (),
                       margin_bytes: int = DEFAULT_GPU_MARGIN, timeout_s: float = DEFAULT_WAIT_S,
                       nvml: Nvml | None = None) -> LeakVerdict:
    """After teardown: each device's used memory is back within margin of
    its baseline, and no engine process survived."""
    own = nvml is None
    nvml = nvml or Nvml()
    try:
        start = time.monotonic()
        survivors = wait_for_exit(list(engine_processes), timeout_s)
        recoveries = []
        for index, used in baseline_used.items():
            left = max(timeout_s - (time.monotonic() - start), 0.0)
            recovery = wait_for_recovery(f"gpu{index} used memory", lambda i=index: nvml.memory(i).used,
                                         used, margin_bytes, higher_is_held=True, timeout_s=left)
            recovery.device = index
            recoveries.append(recovery)
    finally:
        if own:
            nvml.close()
    return LeakVerdict("gpu", list(uses), recoveries, survivors)
