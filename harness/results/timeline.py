"""Memory timelines as the sampler writes them, and their downsampled copy.

The file is CSV: a header `t,<series>,...`, then one row per sample with
`t` in seconds from the check's start and each series in bytes (empty
where a series has no sample at that time). Series are named for a device
or process, e.g. `cuda:0` or `engine-rss`.
"""
from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path


class TimelineError(Exception):
    pass


@dataclasses.dataclass
class Timeline:
    t: list[float]
    series: dict[str, list[float | None]]

    def peaks(self) -> dict[str, int]:
        return {name: int(max(v for v in values if v is not None))
                for name, values in self.series.items() if any(v is not None for v in values)}

    def downsampled(self, points: int) -> "Timeline":
        """At most `points` samples; each keeps its bucket's maximum, so the
        peak survives downsampling."""
        if len(self.t) <= points:
            return self
        # Whole buckets of equal size, so evenly spaced samples stay evenly
        # spaced (and the page can store their times as a start and a step).
        size = -(-len(self.t) // points)
        bounds = [(lo, lo + size) for lo in range(0, len(self.t), size)]
        t = [self.t[lo] for lo, _ in bounds]
        series = {}
        for name, values in self.series.items():
            series[name] = [max((v for v in values[lo:hi] if v is not None), default=None)
                            for lo, hi in bounds]
        return Timeline(t, series)

    def to_json(self) -> dict:
        return {"t": [round(x, 3) for x in self.t],
                "series": {k: [None if v is None else int(v) for v in vs]
                           for k, vs in self.series.items()}}


def read_timeline(path: Path) -> Timeline:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise TimelineError(f"{path}: cannot read timeline: {exc}") from exc
    if not rows or not rows[0] or rows[0][0] != "t":
        raise TimelineError(f"{path}: a timeline starts with a header 't,<series>,...'")
    names = rows[0][1:]
    t: list[float] = []
    series: dict[str, list[float | None]] = {name: [] for name in names}
    last = len(rows)
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        try:
            time = float(row[0])
            cells = row[1:] + [""] * max(0, len(names) - len(row) + 1)
            values = [float(cell) if cell.strip() else None for cell in cells[: len(names)]]
        except ValueError as exc:
            if number == last:  # a sampler killed mid-row: the rows before it stand
                break
            raise TimelineError(f"{path}:{number}: not a number ({exc})") from exc
        t.append(time)
        for name, value in zip(names, values):
            series[name].append(value if value is None or math.isfinite(value) else None)
    return Timeline(t, series)
