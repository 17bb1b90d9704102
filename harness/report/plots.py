"""Memory timeline figures for failing checks, drawn by matplotlib from
the record's `memory_timeline` when the report is rendered.

Only failures get a full figure; the report draws the other checks'
downsampled timelines in the browser. matplotlib is imported on the first
figure, since its import alone costs about half a second.
"""
from __future__ import annotations

import io
from typing import Any

from harness.report.timeline import downsample
from harness.units import GiB

# Enough points to show every step a human can see at this width; the
# bucket maximum keeps the peak.
FIGURE_POINTS = 300


def memory_figure_svg(timeline: dict[str, Any], budget: dict[str, int]) -> str:
    """The timeline of each series with its peak marked, and the card budget
    drawn where one applies."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    shown = downsample(timeline, FIGURE_POINTS)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "mmharness",
                                "font.size": 8}):
        fig = Figure(figsize=(8.0, 2.8))
        ax = fig.add_subplot()
        end = shown["t"][-1] if shown["t"] else 0
        for index, (name, values) in enumerate(shown["series"].items()):
            color = f"C{index}"
            points = [(t, v / GiB) for t, v in zip(shown["t"], values) if v is not None]
            if not points:
                continue
            ax.plot([p[0] for p in points], [p[1] for p in points], lw=1.2, color=color, label=name)
            peak_t, peak = max(points, key=lambda p: p[1])
            ax.plot([peak_t], [peak], "v", color=color, ms=6)
            limit = budget.get(name)
            note = f"peak {peak:.2f} GiB"
            if limit:
                note += f" ({100 * peak * GiB / limit:.0f}% of budget)"
                ax.axhline(limit / GiB, color=color, ls="--", lw=1,
                           label=f"{name} budget {limit / GiB:.1f} GiB")
            # Below the marker (the peak is the series' top, so nothing of
            # it is there), towards the middle of the axes.
            right = peak_t > end / 2
            ax.annotate(note, (peak_t, peak), xytext=(-6 if right else 6, -8),
                        textcoords="offset points", ha="right" if right else "left", va="top",
                        color=color)
        ax.set_xlabel("time since check start (s)")
        ax.set_ylabel("memory (GiB)")
        ax.set_ylim(bottom=0)
        ax.margins(y=0.15)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
        fig.tight_layout()
        buffer = io.StringIO()
        FigureCanvasSVG(fig).print_svg(buffer, metadata={"Date": None})
    return buffer.getvalue()
