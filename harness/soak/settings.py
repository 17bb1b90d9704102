"""A tier's soak settings ([tiers.<tier>.soak] in models.toml): the load's
concurrency, the warm-up left out of every fit, the timeslices, and the
bounds of the leak, drift and goodput checks."""
from __future__ import annotations

from dataclasses import dataclass

from harness.models import ModelMatrixError, tier_settings
from harness.soak.latency import Slo

# The default of --soak-seconds: a short soak in `make run` (make nightly: SOAK_SECONDS).
SOAK_S = 120.0
KEYS = ("concurrency", "warmup_requests", "timeslices", "leak_mib_per_1k_requests", "drift", "slo")
DRIFT_KEYS = ("ttft_p50", "tpot_p50")
SLO_KEYS = ("ttft_s", "tpot_s", "goodput")


@dataclass(frozen=True)
class SoakSettings:
    concurrency: int
    warmup_requests: int
    timeslices: int
    # The largest growth per process not called a leak (MiB per 1,000 requests).
    leak_mib_per_1k_requests: float
    # The largest ratio, last timeslice's median over the first's, per measure.
    drift: dict
    slo: Slo


def for_tier(tier: str, models_file: str | None = None) -> SoakSettings:
    """The tier's soak settings from the model matrix; ModelMatrixError
    naming what is wrong."""
    settings = tier_settings(tier, models_file)
    try:
        return parse(settings.soak, f"{settings.label}.soak")
    except ValueError as e:
        raise ModelMatrixError(str(e)) from None


def parse(raw: object, label: str) -> SoakSettings:
    """The table at `label`; ValueError naming what is wrong."""
    if not isinstance(raw, dict) or set(raw) != set(KEYS):
        got = sorted(raw) if isinstance(raw, dict) else raw
        raise ValueError(f"{label} must give exactly {list(KEYS)}, got {got!r}")
    for key in ("concurrency", "warmup_requests", "timeslices"):
        value = raw[key]
        least = 2 if key == "concurrency" else 1 if key == "timeslices" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{label}: {key} must be a whole number >= {least}, got {value!r}")
    drift, slo = raw["drift"], raw["slo"]
    if not isinstance(drift, dict) or set(drift) != set(DRIFT_KEYS) or not all(_number(v) and v > 1 for v in drift.values()):
        raise ValueError(f"{label}: drift must give {list(DRIFT_KEYS)}, each a ratio > 1, got {drift!r}")
    if not isinstance(slo, dict) or set(slo) != set(SLO_KEYS) or not all(_number(v) and v > 0 for v in slo.values()) \
            or slo["goodput"] > 1:
        raise ValueError(f"{label}: slo must give {list(SLO_KEYS)} (seconds > 0, and a share in (0, 1]), got {slo!r}")
    leak = raw["leak_mib_per_1k_requests"]
    if not _number(leak) or leak <= 0:
        raise ValueError(f"{label}: leak_mib_per_1k_requests must be a number > 0, got {leak!r}")
    return SoakSettings(raw["concurrency"], raw["warmup_requests"], raw["timeslices"], float(leak),
                        {k: float(v) for k, v in drift.items()},
                        Slo(float(slo["ttft_s"]), float(slo["tpot_s"]), float(slo["goodput"])))


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))
