"""Thinning a record's memory timeline for drawing: the page's chart and the
failure figure need fewer points than the record keeps."""
from __future__ import annotations

from typing import Any


def downsample(timeline: dict[str, Any], points: int) -> dict[str, Any]:
    """At most `points` samples of a record's `memory_timeline`; each keeps
    its bucket's maximum, so the peak survives downsampling."""
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
