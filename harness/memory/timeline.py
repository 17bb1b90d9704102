"""Thinning a memory timeline: the sampler's record and the report's chart
keep fewer points than were sampled, and neither may lose a peak."""
from __future__ import annotations

from typing import Any


def downsample(timeline: dict[str, Any], points: int) -> dict[str, Any]:
    """At most `points` samples of a timeline {"t": [...], "series": {name:
    [bytes or None, ...]}}. Each kept sample is its bucket's maximum (None
    only where the whole bucket was unknown), so the peak survives."""
    t = timeline["t"]
    if len(t) <= points:
        return timeline
    # Whole buckets of equal size, so evenly spaced samples stay evenly
    # spaced (and the page can store their times as a start and a step).
    size = -(-len(t) // points)
    starts = range(0, len(t), size)
    return {"t": [t[lo] for lo in starts],
            "series": {name: [max((v for v in values[lo:lo + size] if v is not None), default=None)
                              for lo in starts]
                       for name, values in timeline["series"].items()}}
