"""Growth of a series over requests, fitted robustly: is memory still
climbing after warm-up, and how sure is the fit?

The slope is Theil-Sen's (the median of the pairwise slopes), with Sen's
rank-based confidence interval: a single spike moves neither, so a
transient peak is reported as a peak and never as a leak, while a steady
climb of a few MiB per thousand requests shows through sampling noise.
The leak verdict needs the whole interval above the bound (the fit is
sure the growth exceeds it); an estimate above the bound with an interval
that reaches below it is reported as not conclusive, with the fit.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

# Two-sided 95 %: the normal quantile Sen's interval uses.
Z_95 = 1.959964
# A point this many robust deviations (1.4826 MAD) from the fitted line is a spike.
SPIKE_Z = 6.0
# Sen's interval needs enough pairs to be an interval at all.
MIN_POINTS = 6


@dataclass(frozen=True)
class SlopeFit:
    """Per unit of x: `slope` (the estimate) within [low, high] at 95 %."""
    slope: float
    low: float
    high: float
    intercept: float
    points: int
    skipped: int  # the warm-up's points, left out of the fit
    peak: tuple[float, float]  # (x, y) of the highest point fitted
    spikes: list[tuple[float, float]]  # points far off the line: reported, never fitted away

    def line(self, x: float) -> float:
        return self.intercept + self.slope * x

    def to_dict(self) -> dict:
        return {"slope": self.slope, "low": self.low, "high": self.high, "intercept": self.intercept,
                "points": self.points, "skipped": self.skipped, "peak": list(self.peak),
                "spikes": [list(p) for p in self.spikes]}


class TooFewPoints(ValueError):
    pass


def theil_sen(xs: list[float], ys: list[float], *, skip: int = 0) -> SlopeFit:
    """The fit of ys over xs (x strictly increasing), leaving out the first
    `skip` points (the warm-up)."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    if any(b <= a for a, b in zip(xs, xs[1:])):
        raise ValueError("x must increase strictly (one point per reading)")
    x, y = xs[skip:], ys[skip:]
    n = len(x)
    if n < MIN_POINTS:
        raise TooFewPoints(f"{n} points after a warm-up of {skip}: the fit needs {MIN_POINTS}")
    slopes = sorted((y[j] - y[i]) / (x[j] - x[i]) for i in range(n) for j in range(i + 1, n))
    pairs = len(slopes)
    slope = statistics.median(slopes)
    # Sen (1968): the interval's ranks from the variance of Kendall's S (no ties in x).
    c = Z_95 * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    lo_rank = max(0, math.floor((pairs - c) / 2))
    hi_rank = min(pairs - 1, math.ceil((pairs + c) / 2))
    intercept = statistics.median(yi - slope * xi for xi, yi in zip(x, y))
    residuals = [yi - (intercept + slope * xi) for xi, yi in zip(x, y)]
    mad = statistics.median(abs(r) for r in residuals) * 1.4826
    spikes = [(xi, yi) for xi, yi, r in zip(x, y, residuals) if mad > 0 and abs(r) > SPIKE_Z * mad]
    peak = max(zip(x, y), key=lambda p: p[1])
    return SlopeFit(slope=slope, low=slopes[lo_rank], high=slopes[hi_rank], intercept=intercept,
                    points=n, skipped=skip, peak=peak, spikes=spikes)


@dataclass(frozen=True)
class Growth:
    """A fitted series against its bound: `verdict` is "leak" (the whole
    interval above the bound), "inconclusive" (the estimate above it, the
    interval not) or "flat"."""
    verdict: str
    fit: SlopeFit
    bound: float

    def describe(self, unit: str) -> str:
        f = self.fit
        return (f"{f.slope:+.2f} {unit} (95 % [{f.low:+.2f}, {f.high:+.2f}]) over {f.points} readings "
                f"after {f.skipped} of warm-up; bound {self.bound:g} {unit}; peak {f.peak[1]:.1f} "
                f"at {f.peak[0]:g}")


def growth(fit: SlopeFit, bound: float) -> Growth:
    if fit.low > bound:
        return Growth("leak", fit, bound)
    if fit.slope > bound:
        return Growth("inconclusive", fit, bound)
    return Growth("flat", fit, bound)
