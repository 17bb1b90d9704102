"""What the page's memory chart draws for one check: its timeline thinned
to what the chart can show, axes that fit the data, and the check's own
call marked on it.

The y axis runs from 0 to above the highest thing drawn (a peak, or a budget
line), with headroom, so a flat line at the peak never sits on the frame.
The x axis runs from the timeline's first sample to its last: the timeline
covers the scenario from its start, so the call is shaded within it.
"""
from __future__ import annotations

from typing import Any

from harness.memory.timeline import downsample
from harness.results.record import CheckRecord
from harness.units import GiB, MiB

# Points the browser draws: a passing check's chart is a glance, a failure's
# is read (the record keeps 400, each its bucket's maximum).
PAGE_POINTS = 48
FAILURE_POINTS = 300
# The y axis ends this far above the highest value drawn.
HEADROOM = 1.15


def plot_data(record: CheckRecord, points: int) -> dict[str, Any]:
    """The chart's data for the page's script: times, MiB per series, both
    axes' ranges, the budgets in GiB and the call window, if known."""
    timeline = record.memory_timeline
    shown = downsample(timeline, points)
    t = timeline["t"]
    budgets = _budgets(record)
    top = max([v for values in timeline["series"].values() for v in values if v is not None]
              + list(budgets.values()), default=0)
    data = {"t": _compact_times(shown["t"]),
            "mib": {name: [None if v is None else round(v / MiB) for v in values]
                    for name, values in shown["series"].items()},
            "x": [t[0], t[-1] if t[-1] > t[0] else t[0] + 1],
            "y": [0, round(max(top * HEADROOM, MiB) / GiB, 3)],
            "budget_gib": {name: round(b / GiB, 3) for name, b in budgets.items()}}
    if record.call_window:
        data["call"] = record.call_window
    return data


def caption(record: CheckRecord) -> list[str]:
    """What the chart says in words: each series' peak (against its budget)
    and where the call lies."""
    timeline, budgets = record.memory_timeline, _budgets(record)
    lines = []
    for name, values in timeline["series"].items():
        known = [(v, t) for v, t in zip(values, timeline["t"]) if v is not None]
        if not known:
            continue
        peak, at = max(known, key=lambda p: p[0])
        line = f"{name}: peak {peak / GiB:.2f} GiB at {at:.1f} s"
        if name in budgets:
            line += f", {100 * peak / budgets[name]:.0f}% of its {budgets[name] / GiB:.1f} GiB budget (dashed)"
        lines.append(line)
    if record.call_window:
        start, end = record.call_window
        lines.append(f"shaded: this check's call, {start:.2f}–{end:.2f} s")
    return lines


def _budgets(record: CheckRecord) -> dict[str, int]:
    # Only a series on the chart has its budget line drawn.
    return {name: b for name, b in record.memory_budget.items() if b and name in record.memory_timeline["series"]}


def _compact_times(t: list[float]) -> dict[str, Any] | list[float]:
    """Evenly spaced times as a start and a step; others as they are."""
    step = (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else 0
    even = step > 0 and all(abs(x - (t[0] + i * step)) <= 0.01 * step for i, x in enumerate(t))
    return {"start": round(t[0], 3), "step": round(step, 4), "n": len(t)} if even else [round(x, 2) for x in t]
