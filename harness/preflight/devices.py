"""The tier's devices: the CPU engine's instruction set, or GPUs NVML sees
with the free memory the selected engines ask for."""
from __future__ import annotations

from types import ModuleType

from harness.memory.nvml import Nvml, NvmlUnavailable
from harness.models import ModelEntry
from harness.setup.cpu_features import MissingCpuFeature, require_avx2
from harness.units import GiB

# vLLM's default share of a GPU an engine takes (gpu_memory_utilization).
DEFAULT_GPU_UTILIZATION = 0.9


def cpu_problems() -> list[str]:
    try:
        require_avx2()
    except MissingCpuFeature as e:
        return [f"CPU tier: {e}"]
    return []


def gpu_problems(entries: tuple[ModelEntry, ...], nvml_module: ModuleType | None = None) -> list[str]:
    """NVML must see a GPU whose free memory is at least the largest share
    an engine of the selection asks for: vLLM refuses to start below it."""
    share = max((float(e.engine_args.get("gpu_memory_utilization", DEFAULT_GPU_UTILIZATION))
                 for e in entries), default=DEFAULT_GPU_UTILIZATION)
    try:
        nvml = Nvml(nvml_module)
    except NvmlUnavailable as e:
        return [f"GPU tier: no GPU to run on ({e}); run the CPU tier (--tier cpu), or on a machine "
                f"with NVIDIA GPUs and their driver"]
    try:
        count = nvml.device_count()
        if count == 0:
            return ["GPU tier: NVML sees no GPU device (is CUDA_VISIBLE_DEVICES empty?)"]
        memory = {i: nvml.memory(i) for i in range(count)}
    finally:
        nvml.close()
    if any(m.free >= share * m.total for m in memory.values()):
        return []
    seen = ", ".join(f"GPU {i}: {m.free / GiB:.1f} of {m.total / GiB:.1f} GiB free" for i, m in memory.items())
    return [f"GPU tier: no GPU has the free memory an engine asks for ({share:g} of the device, "
            f"gpu_memory_utilization): {seen}; other processes hold the rest (nvidia-smi lists them)"]
