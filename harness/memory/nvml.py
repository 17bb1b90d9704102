"""The one NVML wrapper (nvidia-ml-py, imported as pynvml): devices, their
memory and the processes on them. The samplers, the leak check, the GPU
count for tensor parallel and the run metadata all read NVML through it.

Device indices are NVML's (PCI bus order), which can differ from CUDA's
when CUDA_VISIBLE_DEVICES is set.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType


class NvmlUnavailable(RuntimeError):
    """No pynvml, no driver, or nvmlInit failed: the message says which."""


def _import_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"nvidia-ml-py (pynvml) is not installed: {exc}") from exc
    return pynvml


@dataclass(frozen=True)
class DeviceMemory:
    total: int
    used: int
    free: int
    reserved: int | None  # v2 only: driver/firmware reservation, not in `used`
    version: int          # 2 for nvmlMemory_v2, 1 for the original struct


class Nvml:
    """One nvmlInit..nvmlShutdown span. `module` is pynvml by default; tests
    of the arithmetic may pass a stand-in with the same functions."""

    def __init__(self, module: ModuleType | None = None):
        self.nvml = module if module is not None else _import_pynvml()
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML unavailable: nvmlInit failed: {exc}") from exc
        self._memory_v2 = getattr(self.nvml, "nvmlMemory_v2", None)
        self._handles: dict[int, object] = {}

    def close(self) -> None:
        self.nvml.nvmlShutdown()

    def __enter__(self) -> "Nvml":
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

    def name(self, index: int) -> str:
        return _text(self.nvml.nvmlDeviceGetName(self.handle(index)))

    def capability(self, index: int) -> str:
        """The CUDA compute capability, "90" for 9.0 (as the engine's probe says it)."""
        major, minor = self.nvml.nvmlDeviceGetCudaComputeCapability(self.handle(index))
        return f"{major}{minor}"

    def driver_version(self) -> str:
        return _text(self.nvml.nvmlSystemGetDriverVersion())

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
        nvml = Nvml(module)
    except NvmlUnavailable as exc:
        return str(exc)
    try:
        if nvml.device_count() == 0:
            return "NVML unavailable: no GPU device visible"
    finally:
        nvml.close()
    return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
