"""The tier's devices: the CPU engine's instruction set, or the run's GPUs
(CUDA_VISIBLE_DEVICES where set, as the scheduler reads it) with the free
memory the selected engines ask for."""
from __future__ import annotations

from types import ModuleType

from harness.engines.devices import run_devices
from harness.memory.card.profiles import DEFAULT_BUDGET_FRACTION
from harness.memory.nvml import Nvml, NvmlUnavailable
from harness.models import ModelEntry
from harness.setup.cpu_features import NATIVE, MissingCpuFeature, isa_features, level_problem, require_avx2
from harness.units import GiB

# vLLM's default share of a GPU an engine takes (gpu_memory_utilization),
# defined once, with the cards' budgets.
DEFAULT_GPU_UTILIZATION = DEFAULT_BUDGET_FRACTION


def cpu_problems(kernel_level: str = NATIVE) -> list[str]:
    """AVX2, and a forced kernel level no higher than this CPU's."""
    try:
        require_avx2()
    except MissingCpuFeature as e:
        return [f"CPU tier: {e}"]
    problem = level_problem(kernel_level, isa_features())
    return [f"CPU tier: {problem}"] if problem else []


def engine_share(entries: tuple[ModelEntry, ...], families: tuple[str, ...] = ()) -> float:
    """The largest share of a device (gpu_memory_utilization) an engine of
    these entries asks for, in the selected scenario families (each family's
    engine arguments over the entry's)."""
    args = [e.engine_args_for(f) for e in entries for f in families] or [e.engine_args for e in entries]
    return max((float(a.get("gpu_memory_utilization", DEFAULT_GPU_UTILIZATION)) for a in args),
               default=DEFAULT_GPU_UTILIZATION)


def gpu_problems(entries: tuple[ModelEntry, ...], nvml_module: ModuleType | None = None,
                 families: tuple[str, ...] = (), environ: dict | None = None) -> list[str]:
    """One of the run's GPUs must have at least the largest share an engine
    of the selection asks for free: vLLM refuses to start below it."""
    share = engine_share(entries, families)
    try:
        nvml = Nvml(nvml_module)
    except NvmlUnavailable as e:
        return [f"GPU tier: no GPU to run on ({e}); run the CPU tier (--tier cpu), or on a machine "
                f"with NVIDIA GPUs and their driver"]
    try:
        count = nvml.device_count()
        try:
            devices = run_devices(environ, count=lambda: count)
        except ValueError as e:
            return [f"GPU tier: {e}"]
        if not devices:
            return ["GPU tier: NVML sees no GPU device (is CUDA_VISIBLE_DEVICES empty?)"]
        missing = [d for d in devices if not 0 <= d < count]
        if missing:
            return [f"GPU tier: CUDA_VISIBLE_DEVICES names GPU {', '.join(map(str, missing))}, "
                    f"but NVML sees {count} (0 to {count - 1})"]
        memory = {i: nvml.memory(i) for i in devices}
    finally:
        nvml.close()
    if any(m.free >= share * m.total for m in memory.values()):
        return []
    seen = ", ".join(f"GPU {i}: {m.free / GiB:.1f} of {m.total / GiB:.1f} GiB free" for i, m in memory.items())
    return [f"GPU tier: no GPU has the free memory an engine asks for ({share:g} of the device, "
            f"gpu_memory_utilization): {seen}; other processes hold the rest (nvidia-smi lists them)"]
