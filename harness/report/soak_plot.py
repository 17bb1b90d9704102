"""The Soak section's data: each soak check's series as SVG polylines
(memory per process over requests, with its fitted line from the end of
the warm-up; latency per timeslice), and its tables. Plain SVG, drawn by
the template: no script needed to read a soak the next morning."""
from __future__ import annotations

from typing import Any

from harness.results.record import CheckRecord

WIDTH, HEIGHT, PAD = 640.0, 200.0, 36.0
COLORS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#c62828", "#00838f")


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _chart(lines: dict[str, list[tuple[float, float]]], fitted: dict[str, tuple[float, float, float]],
           x_label: str, y_label: str) -> dict[str, Any]:
    """Polylines in a WIDTH x HEIGHT box. `fitted`: per line, (intercept,
    slope, first x) of a line drawn dashed from that x to the last."""
    points = [p for line in lines.values() for p in line]
    if not points:
        return {}
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    sx, sy = _scale(x0, x1, PAD, WIDTH - 8), _scale(y0, y1, HEIGHT - PAD, 8)
    out = []
    for i, (name, line) in enumerate(lines.items()):
        color = COLORS[i % len(COLORS)]
        fit = fitted.get(name)
        dashed = None
        if fit:
            a, b, start = fit
            dashed = " ".join(f"{sx(x):.1f},{sy(a + b * x):.1f}" for x in (start, x1))
        out.append({"name": name, "color": color, "dashed": dashed,
                    "points": " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line)})
    return {"width": WIDTH, "height": HEIGHT, "lines": out, "x_label": x_label, "y_label": y_label,
            "x_range": (round(x0, 3), round(x1, 3)), "y_range": (round(y0, 2), round(y1, 2))}


def soak_views(records: list[CheckRecord]) -> list[dict[str, Any]]:
    """Each soak memory or latency check: its chart and its table."""
    views = []
    for r in records:
        fits, series = r.evidence.get("fits"), r.evidence.get("series")
        if isinstance(fits, dict) and isinstance(series, dict) and all(series.values()):
            # Each process from its first reading: growth on one scale, whatever each one's size.
            base = {p: s[0][1] for p, s in series.items()}
            lines = {p: [(n / 1000, mib - base[p]) for n, mib in s] for p, s in series.items()}
            first = {p: next((x for x, _ in lines[p][f.get("skipped", 0):][:1]), 0.0) for p, f in fits.items()}
            views.append({"record": r, "kind": "memory", "rows": [
                {"process": p, **{k: f.get(k) for k in ("verdict", "slope", "low", "high", "points", "skipped")},
                 "peak": f.get("peak")} for p, f in fits.items()],
                "bound": r.evidence.get("leak_bound_mib_per_1k_requests"),
                "chart": _chart(lines, {p: (f["intercept"] - base[p], f["slope"], first[p]) for p, f in fits.items()},
                                "thousands of requests answered", "MiB above the first reading")})
        slices = r.evidence.get("timeslices")
        if isinstance(slices, list) and slices:
            lines = {m: [(s["index"] + 1, s[m]) for s in slices if s.get(m) is not None]
                     for m in ("ttft_p50", "tpot_p50")}
            views.append({"record": r, "kind": "latency", "slices": slices, "drift": r.evidence.get("drift"),
                          "bounds": r.evidence.get("bounds"),
                          "chart": _chart({m: v for m, v in lines.items() if v}, {}, "timeslice", "seconds")})
    return views
