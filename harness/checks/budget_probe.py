"""Budget contract probe for an engine's encoder chunk-size function (no GPU
needed): call it over every card profile and a grid of free-memory values,
and list the inputs where its promises break.

The function probed is vLLM's Gemma4 `_encoder_chunk(patches_per_item,
free_bytes, total_bytes, position_embedding_size) -> int`: how many vision
items to push through the encoder at once.

Transient bytes per item, from the engine's source (gemma4_mm.py): the
dominant buffer is HF's position embedding lookup
`F.one_hot(clamped_positions, num_classes=position_embedding_size)` over
positions of shape (chunk, patches, 2), the 2 being the (x, y) axis, as int64
(8 bytes): patches * 2 * position_embedding_size * 8 bytes per item. Its cast
to the embedding table's dtype and the matmul output are alive at the same
time; the engine covers them with a further factor of 2. So one item costs
    patches * 4 * position_embedding_size * 8  bytes,
e.g. 2520 patches (280 soft tokens x 3x3 pooling) at the default 10240
positions: 787 MiB per item. (Newer transformers releases look positions up
with F.embedding instead, which is far smaller; the probe holds the engine
to the budget it states, which is the safe side.)

Invariants, for every input:
  at-least-one      the result is an int >= 1 (one item must always go through)
  one-when-nothing  the result is 1 when free memory, patches or the
                    embedding size is 0
  within-half-free  result * transient <= free / 2, except the floor chunk of 1
  monotone-in-free  the result does not go down when free memory goes up
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

from harness.verdicts import Cause, CheckFailure
from harness.memory.card.profiles import PROFILES, CardProfile
from harness.units import MiB

ChunkFn = Callable[[int, int, int, int], int]

EXPECTED_PARAMS = ("patches_per_item", "free_bytes", "total_bytes", "position_embedding_size")

# Patches per item: none, one, Gemma4 video frames (70 soft tokens x 9),
# images at 280 and 1120 soft tokens (x 9 patches each).
PATCHES_GRID = (0, 1, 630, 2520, 10080)
# Position embedding sizes: none, tiny, Gemma4's default.
POSITION_GRID = (0, 1, 10240)


def transient_bytes_per_item(patches_per_item: int, position_embedding_size: int) -> int:
    one_hot_int64 = patches_per_item * 2 * position_embedding_size * 8
    return one_hot_int64 * 2  # plus its dtype cast and the matmul output alive with it


def free_grid(profile: CardProfile) -> list[int]:
    """Free-memory values for a card, ascending: the edges (0, 1 byte),
    powers of two from 1 MiB up to the capacity, the typical after-load
    figure, and the capacity itself."""
    cap = profile.capacity_bytes
    points = {0, 1, 1023, cap // 2, cap - 1, cap, max(profile.typical_free_after_load_bytes, 0)}
    p = MiB
    while p < cap:
        points.update((p, p + p // 2))
        p *= 2
    return sorted(x for x in points if x <= cap)


@dataclass(frozen=True)
class Violation:
    invariant: str
    inputs: dict
    result: int | None
    detail: str


def probe_encoder_chunk(fn: ChunkFn, profiles: Iterable[CardProfile] = PROFILES.values(),
                        patches_grid: Iterable[int] = PATCHES_GRID,
                        position_grid: Iterable[int] = POSITION_GRID) -> list[Violation]:
    """Every violation of the invariants above, each with its inputs."""
    violations: list[Violation] = []
    for profile in profiles:
        total = profile.capacity_bytes
        for patches in patches_grid:
            for positions in position_grid:
                previous: tuple[int, int] | None = None  # (free, result)
                for free in free_grid(profile):
                    inputs = {"card": profile.id, "patches_per_item": patches, "free_bytes": free,
                              "total_bytes": total, "position_embedding_size": positions}
                    result = fn(patches, free, total, positions)
                    violations += _point_violations(inputs, result)
                    if previous and isinstance(result, int) and result < previous[1]:
                        violations.append(Violation(
                            "monotone-in-free", {**inputs, "previous_free_bytes": previous[0]}, result,
                            f"{result} at {free} free, down from {previous[1]} at {previous[0]} free"))
                    if isinstance(result, int):
                        previous = (free, result)
    return violations


def _point_violations(inputs: dict, result) -> list[Violation]:
    if not isinstance(result, int) or result < 1:
        return [Violation("at-least-one", inputs, result if isinstance(result, int) else None,
                          f"returned {result!r}")]
    found = []
    patches, free, positions = inputs["patches_per_item"], inputs["free_bytes"], inputs["position_embedding_size"]
    if (free == 0 or patches == 0 or positions == 0) and result != 1:
        found.append(Violation("one-when-nothing", inputs, result, f"returned {result}, expected 1"))
    transient = result * transient_bytes_per_item(patches, positions)
    if result > 1 and 2 * transient > free:
        found.append(Violation("within-half-free", inputs, result,
                               f"{result} items x {transient // result} B = {transient} B "
                               f"> half of free ({free // 2} B)"))
    return found


def check_encoder_chunk(fn: ChunkFn, *, source: str = "", limit: int = 20, **grids) -> None:
    """Raise CheckFailure(OVER_BUDGET) listing the first `limit` violations."""
    violations = probe_encoder_chunk(fn, **grids)
    if not violations:
        return
    by_invariant: dict[str, int] = {}
    for v in violations:
        by_invariant[v.invariant] = by_invariant.get(v.invariant, 0) + 1
    first = violations[0]
    raise CheckFailure(
        Cause.OVER_BUDGET,
        f"{source or 'encoder chunk function'} breaks its budget contract {len(violations)} times "
        f"{by_invariant}; first: {first.invariant} at {first.inputs}: {first.detail}",
        evidence={"source": source, "counts": by_invariant,
                  "violations": [asdict(v) for v in violations[:limit]]})


def load_gemma4_encoder_chunk(engine_python: str | Path) -> tuple[ChunkFn | None, str]:
    """(the installed vLLM's Gemma4 _encoder_chunk, where it came from), or
    (None, why not): the engine runs under another interpreter than the
    harness (the probe imports the engine here), or lacks the function."""
    if str(engine_python) != sys.executable:
        return None, ("the probe imports the engine in the harness's interpreter; "
                      f"the engine runs under {engine_python}")
    try:
        import vllm
        from vllm.model_executor.models import gemma4_mm
    except ImportError as exc:
        return None, f"no vLLM Gemma4 multimodal model here: {exc}"
    version = getattr(vllm, "__version__", "unknown")
    cls = getattr(gemma4_mm, "Gemma4ForConditionalGeneration", None)
    fn = getattr(cls, "_encoder_chunk", None)
    if fn is None:
        return None, f"vLLM {version} has no Gemma4ForConditionalGeneration._encoder_chunk"
    params = tuple(inspect.signature(fn).parameters)
    if params != EXPECTED_PARAMS:
        return None, f"vLLM {version} _encoder_chunk takes {params}, the probe knows {EXPECTED_PARAMS}"
    return fn, f"vllm {version} Gemma4ForConditionalGeneration._encoder_chunk"
