"""Card profiles for small-card emulation (`--card l4-22g`): the capacity a
smaller GPU offers, and the free memory a scenario can expect on it once
model weights are loaded.

The capacities are the cards' usable memory as named in the ids. The
after-load figure is a planning assumption, not a measurement: capacity
minus the weights of a ~4B-parameter multimodal checkpoint in bf16 and the
CUDA context. A run records the real figure beside it (`after_load_record`).
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.units import GiB

# The assumption behind typical_free_after_load (see the module docstring).
REFERENCE_WEIGHTS_BYTES = 8 * GiB
CUDA_CONTEXT_BYTES = 1 * GiB

# Share of the card's capacity the engine is told to use, as a user of the
# real card would set gpu_memory_utilization (vLLM's default is 0.9).
DEFAULT_BUDGET_FRACTION = 0.9


@dataclass(frozen=True)
class CardProfile:
    id: str
    name: str
    capacity_bytes: int

    @property
    def typical_free_after_load_bytes(self) -> int:
        return self.capacity_bytes - REFERENCE_WEIGHTS_BYTES - CUDA_CONTEXT_BYTES

    def budget_bytes(self, fraction: float = DEFAULT_BUDGET_FRACTION) -> int:
        return int(self.capacity_bytes * fraction)


PROFILES: dict[str, CardProfile] = {p.id: p for p in (
    CardProfile("l4-22g", "NVIDIA L4", 22 * GiB),
    CardProfile("a10g-24g", "NVIDIA A10G", 24 * GiB),
    CardProfile("a100-40g", "NVIDIA A100 40GB", 40 * GiB),
    CardProfile("a100-80g", "NVIDIA A100 80GB", 80 * GiB),
    CardProfile("h100-80g", "NVIDIA H100 80GB", 80 * GiB),
    CardProfile("h200-141g", "NVIDIA H200", 141 * GiB),
)}


class UnknownCard(ValueError):
    pass


def get_profile(card_id: str) -> CardProfile:
    try:
        return PROFILES[card_id.lower()]
    except KeyError:
        raise UnknownCard(f"unknown card profile {card_id!r}; known: {', '.join(PROFILES)}") from None


def gpu_memory_utilization(profile: CardProfile, physical_total_bytes: int,
                           fraction: float = DEFAULT_BUDGET_FRACTION) -> float:
    """The engine's gpu_memory_utilization on the physical card, so that its
    budget is the profile's budget: vLLM multiplies this by the physical
    total, not by what the ballast leaves free."""
    if profile.capacity_bytes > physical_total_bytes:
        raise ValueError(f"{profile.id} ({profile.capacity_bytes / GiB:.0f} GiB) does not fit on a "
                         f"card of {physical_total_bytes / GiB:.1f} GiB")
    return profile.budget_bytes(fraction) / physical_total_bytes


def after_load_record(profile: CardProfile, measured_free_bytes: int) -> dict:
    """The expected after-load free figure beside the real one."""
    expected = profile.typical_free_after_load_bytes
    return {
        "card": profile.id,
        "expected_free_after_load_bytes": expected,
        "measured_free_after_load_bytes": measured_free_bytes,
        "difference_bytes": measured_free_bytes - expected,
    }
