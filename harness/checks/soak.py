"""The soak's properties over what a soak left (harness.soak.drive.Soak):
it ran its time with every request answered; no engine process grew past
the leak bound after warm-up; the last timeslice is no slower than the
first beyond the drift bounds; and enough requests met the SLO. Each
raises CheckFailure with its cause and returns what goes in the record."""
from __future__ import annotations

from harness.checks.requests import check_completed
from harness.verdicts import Cause, CheckFailure
from harness.engines.outcomes import Completion
from harness.soak.drive import Soak
from harness.soak.fit import TooFewPoints, growth, theil_sen
from harness.soak.latency import drift, goodput, timeslices
from harness.soak.settings import SoakSettings

# Readings fitted at most (evenly thinned): Theil-Sen's pairs grow as n².
MAX_FIT_POINTS = 300


def check_ran(soak: Soak) -> None:
    """A soak ended by a crash or a hang fails every check with that cause."""
    if soak.stopped is not None:
        crash = soak.stopped
        last = soak.waves[-1] if soak.waves else None
        raise CheckFailure(crash.cause, f"the soak stopped after {soak.elapsed_s:.0f} of {soak.seconds:.0f} s "
                           f"({soak.requests} requests): {crash.detail}",
                           evidence={"crash": crash.to_dict(), "stopped_at_s": round(soak.elapsed_s, 1),
                                     "last_wave_sent_s": round(last.sent_s, 1) if last else None})


def sampled_waves(soak: Soak, settings: SoakSettings) -> list[int]:
    """The waves judged against references (one per timeslice after the
    warm-up); a soak too short to have any fails its premise."""
    check_ran(soak)
    waves = soak.sampled(settings.warmup_requests, settings.timeslices)
    if not waves:
        raise CheckFailure(Cause.PREMISE, f"the soak served {soak.requests} requests: none after the warm-up "
                           f"of {settings.warmup_requests} to sample")
    return waves


def check_answered(soak: Soak) -> dict:
    """Every request of every wave answered."""
    check_ran(soak)
    evidence = {"seconds": round(soak.elapsed_s, 1), "waves": len(soak.waves), "requests": soak.requests}
    unanswered = sum(not isinstance(o, Completion) for w in soak.waves for o in w.outcomes)
    try:
        for wave in soak.waves:
            check_completed(wave.outcomes, wave.workload.labels)
    except CheckFailure as failure:
        failure.message = f"{unanswered} of {soak.requests} soak requests unanswered; the first: {failure.message}"
        failure.args = (f"[{failure.cause.value}] {failure.message}",)
        failure.evidence.update(evidence)
        raise
    return evidence


def memory_fits(soak: Soak, settings: SoakSettings) -> dict:
    """Per process (and per process's device memory, on a GPU): the fit of
    its MiB over thousands of requests answered, after the warm-up, against
    the leak bound."""
    readings = soak.readings
    skip = sum(1 for r in readings if r.requests <= settings.warmup_requests)
    step = max(1, (len(readings) - skip) // MAX_FIT_POINTS)
    kept = readings[:skip] + readings[skip::step]
    out = {}
    for process in sorted({p for r in kept for p in r.mib}):
        series = [(r.requests / 1000, r.mib[process]) for r in kept if process in r.mib]
        xs, ys = [x for x, _ in series], [y for _, y in series]
        try:
            out[process] = growth(theil_sen(xs, ys, skip=min(skip, len(xs))),
                                  settings.leak_mib_per_1k_requests)
        except TooFewPoints as e:
            raise CheckFailure(Cause.PREMISE, f"{process}: {e} (a soak of {soak.elapsed_s:.0f} s served "
                               f"{soak.requests} requests; warm-up {settings.warmup_requests}): "
                               f"too short to fit memory growth") from None
    return out


def check_no_leak(soak: Soak, settings: SoakSettings) -> dict:
    check_ran(soak)
    fits = memory_fits(soak, settings)
    evidence = {"leak_bound_mib_per_1k_requests": settings.leak_mib_per_1k_requests,
                "fits": {p: {"verdict": g.verdict, **g.fit.to_dict()} for p, g in fits.items()},
                "series": {p: [[r.requests, round(r.mib[p], 1)] for r in soak.readings if p in r.mib]
                           for p in fits}}
    leaks = {p: g for p, g in fits.items() if g.verdict == "leak"}
    if leaks:
        raise CheckFailure(Cause.LEAK, "; ".join(f"{p} grew {g.describe('MiB per 1,000 requests')}"
                                                 for p, g in leaks.items()), evidence=evidence)
    return evidence


def _slices(soak: Soak, settings: SoakSettings):
    waves = soak.after_warmup(settings.warmup_requests)
    if not waves:
        raise CheckFailure(Cause.PREMISE, f"the soak served {soak.requests} requests: none after the warm-up "
                           f"of {settings.warmup_requests}, so there is no timeslice to compare")
    warm = waves[0].sent_s
    after = [t for t in soak.timings() if t.sent_s >= warm]
    last_sent = max(t.sent_s for t in after)
    return timeslices(after, warm, last_sent + 1e-9, settings.timeslices)


def check_no_drift(soak: Soak, settings: SoakSettings) -> dict:
    check_ran(soak)
    slices = _slices(soak, settings)
    found = drift(slices, settings.drift)
    evidence = {"timeslices": [s.to_dict() for s in slices], "drift": found.ratios, "bounds": found.bounds}
    # Too few waves to fill every timeslice compare two moments, not a trend (a slowdown starves the soak).
    empty = [s.index for s in slices if not s.answered]
    if empty or set(found.ratios) != set(settings.drift):
        raise CheckFailure(Cause.PREMISE, f"the soak served {soak.requests} requests, too few after the warm-up "
                           f"of {settings.warmup_requests} to compare its timeslices: "
                           f"{len(empty)} of {len(slices)} have no answer", evidence=evidence)
    if found.beyond:
        raise CheckFailure(Cause.DRIFT, f"the last timeslice is slower than the first: {found.describe()}",
                           evidence=evidence)
    return evidence


def check_goodput(soak: Soak, settings: SoakSettings) -> dict:
    check_ran(soak)
    slo = settings.slo
    share = goodput(soak.timings(), slo)
    evidence = {"goodput": round(share, 4), "slo": vars(slo)}
    if share < slo.goodput:
        raise CheckFailure(Cause.SLO, f"{share:.1%} of {soak.requests} requests met the SLO (TTFT <= "
                           f"{slo.ttft_s:g} s, TPOT <= {slo.tpot_s:g} s); the tier asks {slo.goodput:.0%}",
                           evidence=evidence)
    return evidence
