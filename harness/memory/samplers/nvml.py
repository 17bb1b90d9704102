"""NvmlSampler: device used memory per GPU, and the engine process tree's
share of it, from NVML (the nvidia-ml-py package, imported as pynvml).

Keys: "gpu<i>-used" (device-wide used bytes) and "gpu<i>-engine" (bytes NVML
attributes to the engine's processes). Device indices are NVML's (PCI bus
order), which can differ from CUDA's when CUDA_VISIBLE_DEVICES is set.

Inside a container NVML reports host-namespace PIDs, which match none of the
engine's PIDs as seen from inside. Then "gpu<i>-engine" is left out of that
tick (not written as zero) and the record's notes and meta say why; callers
fall back to device-used arithmetic (harness/memory/card/capacity.py).
"""
from __future__ import annotations

import os
from collections import Counter
from types import ModuleType
from typing import Iterable, Mapping, NamedTuple

from harness.memory.nvml import Nvml, NvmlUnavailable

from .base import DEFAULT_RATE_HZ, Sampler, SamplerUnavailable
from .process_tree import ProcessTree


def used_series(index: int) -> str:
    return f"gpu{index}-used"


def engine_series(index: int) -> str:
    return f"gpu{index}-engine"


# -- attribution of device memory to the engine's processes (pure) ---------

MATCHED = "matched"                     # some engine pid is listed: figure is the sum
NONE_LISTED = "none-listed"             # NVML lists no process at all: no figure
NOT_ON_DEVICE = "engine-not-on-device"  # PIDs comparable (a harness pid is listed), engine absent: 0
PID_MISMATCH = "pid-mismatch"           # processes listed, none ours: likely another PID namespace
NO_FIGURE = "no-per-process-figure"     # engine listed, but the driver gives no byte count


class Attribution(NamedTuple):
    bytes: int | None
    status: str


def attribute(engine_pids: Iterable[int], listed: Mapping[int, int | None],
              own_pids: Iterable[int] = ()) -> Attribution:
    """How much of a device NVML attributes to the engine. `own_pids` are
    other harness processes known to be on the GPU (e.g. the ballast): one of
    them being listed proves NVML's PIDs are in our namespace, so an absent
    engine really uses 0 there."""
    engine = set(engine_pids) & listed.keys()
    if engine:
        figures = [listed[p] for p in engine]
        if any(b is None for b in figures):
            return Attribution(None, NO_FIGURE)
        return Attribution(sum(figures), MATCHED)
    if not listed:
        return Attribution(None, NONE_LISTED)
    if set(own_pids) & listed.keys():
        return Attribution(0, NOT_ON_DEVICE)
    return Attribution(None, PID_MISMATCH)


def mismatch_note(index: int, engine_pids: Iterable[int], listed: Iterable[int]) -> str:
    return (f"gpu{index}: NVML lists pids {sorted(listed)}, none of the engine's "
            f"{sorted(engine_pids)}; if the engine runs on this device, NVML's pids come from "
            f"another PID namespace (container), so per-process figures are unknown, not zero")


class NvmlSampler(Sampler):
    """Samples device used memory and, given root_pid, the engine tree's
    per-process usage on each device."""

    name = "nvml"

    def __init__(self, root_pid: int | None = None, rate_hz: float = DEFAULT_RATE_HZ, *,
                 devices: Iterable[int] | None = None, own_pids: Iterable[int] = (),
                 refresh_interval_s: float = 0.5, nvml_module: ModuleType | None = None):
        super().__init__(rate_hz=rate_hz, refresh_interval_s=refresh_interval_s)
        self.root_pid = root_pid
        self.own_pids = {os.getpid(), *own_pids}
        self._devices = list(devices) if devices is not None else None
        self._nvml_module = nvml_module
        self._nvml: Nvml | None = None
        self._tree = ProcessTree(root_pid) if root_pid is not None else None
        self._status: dict[int, Counter] = {}

    @property
    def devices(self) -> list[int]:
        return list(self._devices or [])

    def _open(self) -> None:
        try:
            self._nvml = Nvml(self._nvml_module)
        except NvmlUnavailable as exc:
            raise SamplerUnavailable(str(exc)) from exc
        count = self._nvml.device_count()
        if self._devices is None:
            self._devices = list(range(count))
        if not self._devices or max(self._devices) >= count:
            self._nvml.close()
            raise SamplerUnavailable(f"NVML sees {count} device(s); asked for {self._devices}")
        self._status = {i: Counter() for i in self._devices}
        self._meta.update(root_pid=self.root_pid, devices=self._devices)

    def _refresh(self) -> None:
        if self._tree is not None:
            self._tree.refresh()

    def _read(self) -> dict[str, int]:
        assert self._nvml is not None
        reading: dict[str, int] = {}
        for index in self._devices:
            memory = self._nvml.memory(index)
            reading[used_series(index)] = memory.used
            self._meta["memory_info_version"] = memory.version
            if self._tree is None:
                continue
            listed = self._nvml.processes(index)
            share = attribute(self._tree.pids, listed, self.own_pids)
            self._status[index][share.status] += 1
            if share.bytes is not None:
                reading[engine_series(index)] = share.bytes
            elif share.status == PID_MISMATCH:
                self.note(mismatch_note(index, self._tree.pids, listed))
            elif share.status == NO_FIGURE:
                self.note(f"gpu{index}: NVML lists the engine but gives no per-process bytes")
        self._meta["attribution"] = {f"gpu{i}": dict(c) for i, c in self._status.items()}
        return reading

    def _close(self) -> None:
        if self._tree is not None:
            self._tree.close()
        if self._nvml is not None:
            self._nvml.close()
