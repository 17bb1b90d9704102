"""Latency over a soak: each request's time to first token (TTFT) and time
per output token (TPOT), measured by the client from the stream, grouped
into timeslices; drift (the last timeslice slower than the first) and
goodput (the share of requests within the tier's SLO)."""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Timing:
    """One streamed request: when it was sent (seconds from the soak's
    start) and what the client saw. `tpot_s` is None for one token."""
    sent_s: float
    e2e_s: float
    ttft_s: float | None
    tokens: int
    ok: bool

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.tokens - 1)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


@dataclass(frozen=True)
class Slice:
    index: int
    t0: float
    t1: float
    requests: int
    answered: int
    ttft_p50: float | None
    ttft_p90: float | None
    tpot_p50: float | None
    tpot_p90: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def timeslices(timings: list[Timing], start: float, end: float, count: int) -> list[Slice]:
    """`count` equal slices of [start, end), each with the requests sent in it."""
    if count < 1 or end <= start:
        raise ValueError(f"timeslices need count >= 1 and end > start, got {count}, [{start}, {end})")
    width = (end - start) / count
    out = []
    for i in range(count):
        t0, t1 = start + i * width, start + (i + 1) * width
        inside = [t for t in timings if t0 <= t.sent_s < t1 or (i == count - 1 and t.sent_s == end)]
        ttft = [t.ttft_s for t in inside if t.ok and t.ttft_s is not None]
        tpot = [t.tpot_s for t in inside if t.ok and t.tpot_s is not None]
        out.append(Slice(i, t0, t1, len(inside), sum(t.ok for t in inside),
                         statistics.median(ttft) if ttft else None, _quantile(ttft, 0.9),
                         statistics.median(tpot) if tpot else None, _quantile(tpot, 0.9)))
    return out


@dataclass(frozen=True)
class Drift:
    """The last timeslice's medians against the first's: `ratios` per
    measure, and the measures beyond their bound."""
    ratios: dict[str, float]
    bounds: dict[str, float]

    @property
    def beyond(self) -> dict[str, float]:
        return {k: r for k, r in self.ratios.items() if r > self.bounds[k]}

    def describe(self) -> str:
        return ", ".join(f"{k} x{r:.2f} (bound x{self.bounds[k]:g})" for k, r in self.ratios.items())


def drift(slices: list[Slice], bounds: dict[str, float]) -> Drift:
    """`bounds`: the largest ratio last/first allowed per measure
    ("ttft_p50", "tpot_p50"). A measure missing from either slice is left out."""
    first, last = slices[0], slices[-1]
    ratios = {}
    for key in bounds:
        a, b = getattr(first, key), getattr(last, key)
        if a and b is not None:
            ratios[key] = b / a
    return Drift(ratios, dict(bounds))


@dataclass(frozen=True)
class Slo:
    """What a request must meet to count as good: TTFT and TPOT within
    these; and the share of requests that must be good."""
    ttft_s: float
    tpot_s: float
    goodput: float


def goodput(timings: list[Timing], slo: Slo) -> float:
    """The share of requests answered within the SLO (a failed request is not good)."""
    if not timings:
        return 0.0
    good = [t for t in timings if t.ok and t.ttft_s is not None and t.ttft_s <= slo.ttft_s
            and (t.tpot_s is None or t.tpot_s <= slo.tpot_s)]
    return len(good) / len(timings)
