"""NvmlSampler: device used memory per GPU, and the engine process tree's
share of it, from NVML (the nvidia-ml-py package, imported as pynvml).

Keys: "gpu<i>-used" (device-wide used bytes) and "gpu<i>-engine" (bytes NVML
attributes to the engine's processes). Device indices are NVML's (PCI bus
order), which can differ from CUDA's when CUDA_VISIBLE_DEVICES is set.

Inside a container NVML reports host-namespace PIDs, which match none of the
engine's PIDs as seen from inside. Then "gpu<i>-engine" is left out of that
tick (not written as zero) and the record's notes and meta say why; callers
fall back to device-used arithmetic (harness/card/capacity.py).
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Iterable, Mapping, NamedTuple

from .base import DEFAULT_RATE_HZ, Sampler, SamplerUnavailable
from .process_tree import ProcessTree


def used_key(index: int) -> str:
    return f"gpu{index}-used"


def engine_key(index: int) -> str:
    return f"gpu{index}-engine"


def _import_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise SamplerUnavailable(f"nvidia-ml-py (pynvml) is not installed: {exc}") from exc
    return pynvml


@dataclass(frozen=True)
class DeviceMemory:
    total: int
    used: int
    free: int
    reserved: int | None  # v2 only: driver/firmware reservation, not in `used`
    version: int          # 2 for nvmlMemory_v2, 1 for the original struct


class NvmlSession:
    """One nvmlInit..nvmlShutdown span. `module` is pynvml by default; tests
    of the arithmetic may pass a stand-in with the same functions."""

    def __init__(self, module: ModuleType | None = None):
        self.nvml = module if module is not None else _import_pynvml()
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:
            raise SamplerUnavailable(f"NVML unavailable: nvmlInit failed: {exc}") from exc
        self._memory_v2 = getattr(self.nvml, "nvmlMemory_v2", None)
        self._handles: dict[int, object] = {}

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def __enter__(self) -> "NvmlSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def device_count(self) -> int:
        return self.nvml.nvmlDeviceGetCount()

    def handle(self, index: int):
        if index not in self._handles:
            self._handles[index] = self.nvml.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def memory(self, index: int) -> DeviceMemory:
        """v2 memory info where the driver has it (its `used` leaves out the
        driver's reservation), else the original struct."""
        handle = self.handle(index)
        if self._memory_v2 is not None:
            try:
                m = self.nvml.nvmlDeviceGetMemoryInfo(handle, version=self._memory_v2)
                return DeviceMemory(int(m.total), int(m.used), int(m.free), int(m.reserved), 2)
            except self.nvml.NVMLError:
                self._memory_v2 = None  # old driver: no _v2 symbol or version mismatch
        m = self.nvml.nvmlDeviceGetMemoryInfo(handle)
        return DeviceMemory(int(m.total), int(m.used), int(m.free), None, 1)

    def processes(self, index: int) -> dict[int, int | None]:
        """pid -> used bytes (None where the driver does not say) of the
        compute processes NVML lists on the device."""
        handle = self.handle(index)
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except getattr(self.nvml, "NVMLLibraryMismatchError", ()):
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses_v2(handle)
        return {int(p.pid): (None if p.usedGpuMemory is None else int(p.usedGpuMemory)) for p in procs}


def nvml_unavailable_reason(module: ModuleType | None = None) -> str | None:
    """None when NVML works and sees at least one GPU, else why not."""
    try:
        session = NvmlSession(module)
    except SamplerUnavailable as exc:
        return str(exc)
    try:
        if session.device_count() == 0:
            return "NVML unavailable: no GPU device visible"
    finally:
        session.close()
    return None


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
        self._session: NvmlSession | None = None
        self._tree = ProcessTree(root_pid) if root_pid is not None else None
        self._status: dict[int, Counter] = {}

    @property
    def devices(self) -> list[int]:
        return list(self._devices or [])

    def _open(self) -> None:
        self._session = NvmlSession(self._nvml_module)
        count = self._session.device_count()
        if self._devices is None:
            self._devices = list(range(count))
        if not self._devices or max(self._devices) >= count:
            self._session.close()
            raise SamplerUnavailable(f"NVML sees {count} device(s); asked for {self._devices}")
        self._status = {i: Counter() for i in self._devices}
        self._meta.update(root_pid=self.root_pid, devices=self._devices)

    def _refresh(self) -> None:
        if self._tree is not None:
            self._tree.refresh()

    def _read(self) -> dict[str, int]:
        assert self._session is not None
        reading: dict[str, int] = {}
        for index in self._devices:
            memory = self._session.memory(index)
            reading[used_key(index)] = memory.used
            self._meta["memory_info_version"] = memory.version
            if self._tree is None:
                continue
            listed = self._session.processes(index)
            share = attribute(self._tree.pids, listed, self.own_pids)
            self._status[index][share.status] += 1
            if share.bytes is not None:
                reading[engine_key(index)] = share.bytes
            elif share.status == PID_MISMATCH:
                self.note(mismatch_note(index, self._tree.pids, listed))
            elif share.status == NO_FIGURE:
                self.note(f"gpu{index}: NVML lists the engine but gives no per-process bytes")
        self._meta["attribution"] = {f"gpu{i}": dict(c) for i, c in self._status.items()}
        return reading

    def _close(self) -> None:
        if self._tree is not None:
            self._tree.close()
        if self._session is not None:
            self._session.close()
