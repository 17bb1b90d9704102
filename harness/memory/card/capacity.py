"""Does the engine's peak device memory stay within its budget on the emulated card?

The peak comes from NVML's per-process figures for the engine's processes.
Where those are unusable (container PID namespaces, drivers that give no
per-process bytes) it falls back to device used minus ballast minus
baseline, and the figure says which way it was obtained and why.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from harness.verdicts import Cause, CheckFailure
from harness.memory.samplers.base import SamplerResult
from harness.memory.samplers.nvml import NO_FIGURE, PID_MISMATCH, engine_series, used_series

from .profiles import CardProfile, GiB

PER_PROCESS = "nvml-per-process"
DEVICE_ARITHMETIC = "device-used-minus-ballast-minus-baseline"


@dataclass(frozen=True)
class EnginePeak:
    device: int
    bytes: int
    method: str
    note: str = ""


def engine_peak(result: SamplerResult, device: int, *, baseline_used: int,
                ballast_bytes: int) -> EnginePeak:
    """The engine's peak on one device from an NvmlSampler record.

    baseline_used: device used before the ballast started.
    ballast_bytes: device used with the ballast ready, minus baseline_used
    (its tensors and its CUDA context).
    """
    counts = result.meta.get("attribution", {}).get(f"gpu{device}", {})
    unusable = {s: n for s, n in counts.items() if s in (PID_MISMATCH, NO_FIGURE) and n}
    peaks = result.peak
    if engine_series(device) in peaks and not unusable:
        return EnginePeak(device, peaks[engine_series(device)], PER_PROCESS)
    if used_series(device) not in peaks:
        raise ValueError(f"the record has no samples of gpu{device}")
    why = (f"NVML per-process figures unusable ({unusable})" if unusable
           else "no NVML per-process figure for the engine")
    return EnginePeak(device, peaks[used_series(device)] - ballast_bytes - baseline_used,
                      DEVICE_ARITHMETIC, f"{why}; peak = device used peak {peaks[used_series(device)]} "
                      f"- ballast {ballast_bytes} - baseline {baseline_used}")


def check_within_budget(profile: CardProfile, peak: EnginePeak) -> None:
    """Raise CheckFailure(OVER_BUDGET) if the engine's peak exceeds the budget
    it was given (`profile.budget_bytes()`, what gpu_memory_utilization
    grants it), not the card's capacity: the ballast makes exceeding the
    capacity impossible, so a check against it could never fail."""
    budget = profile.budget_bytes()
    if peak.bytes <= budget:
        return
    raise CheckFailure(
        Cause.OVER_BUDGET,
        f"engine peak {peak.bytes / GiB:.2f} GiB on gpu{peak.device} exceeds the {budget / GiB:.2f} GiB "
        f"budget it was given on {profile.id} ({peak.method})",
        evidence={"card": profile.id, "budget_bytes": budget, "capacity_bytes": profile.capacity_bytes,
                  "over_by_bytes": peak.bytes - budget, **asdict(peak)})
