"""The soak's fits on crafted series: a plateau after warm-up is not a
leak, a steady climb is, a single spike is a peak and not a leak; and the
latency timeslices, drift and goodput."""
import random

import pytest

from harness.soak.fit import TooFewPoints, growth, theil_sen
from harness.soak.latency import Slo, Timing, drift, goodput, timeslices

# Readings every 10 requests, 60 of them, with noise of +-2 MiB.
XS = [10.0 * (i + 1) for i in range(60)]
BOUND = 20.0  # MiB per 1,000 requests


def noisy(values, seed=0, spread=2.0):
    rng = random.Random(seed)
    return [v + rng.uniform(-spread, spread) for v in values]


def per_1k(ys):
    """Readings in MiB over requests, fitted per 1,000 requests."""
    return theil_sen([x / 1000 for x in XS], ys, skip=15)


def test_a_plateau_after_warm_up_is_not_a_leak():
    # Caches fill over the first 150 requests (+300 MiB), then stay.
    ys = noisy([1000 + min(x, 150) * 2 for x in XS])
    g = growth(per_1k(ys), BOUND)
    assert g.verdict == "flat", g.describe("MiB/1k")
    assert g.fit.skipped == 15 and g.fit.points == 45


def test_the_warm_up_is_what_the_fit_leaves_out():
    """The premise of the plateau test: fitted from the start, the fill
    reads as growth (the interval clears zero); after the warm-up it holds 0."""
    ys = noisy([1000 + min(x, 150) * 2 for x in XS])
    assert theil_sen([x / 1000 for x in XS], ys).low > 0
    after = per_1k(ys)
    assert after.low <= 0 <= after.high


def test_a_steady_climb_is_a_leak_with_its_interval():
    ys = noisy([1000 + x * 0.1 for x in XS])  # 100 MiB per 1,000 requests
    g = growth(per_1k(ys), BOUND)
    assert g.verdict == "leak", g.describe("MiB/1k")
    assert g.fit.low < 100 < g.fit.high and g.fit.low > BOUND


def test_a_single_spike_is_a_peak_not_a_leak():
    ys = noisy([1000.0] * len(XS))
    ys[40] += 500
    fit = per_1k(ys)
    assert growth(fit, BOUND).verdict == "flat"
    assert fit.peak == (XS[40] / 1000, ys[40])
    assert fit.spikes == [(XS[40] / 1000, ys[40])]


def test_a_climb_within_the_noise_is_not_conclusive():
    """Just above the bound, with noise far larger: the estimate may cross
    the bound, the interval does not clear it."""
    ys = noisy([1000 + x * 0.025 for x in XS], spread=40)
    g = growth(per_1k(ys), BOUND)
    assert g.verdict in ("inconclusive", "flat")
    assert g.fit.low < BOUND < g.fit.high


def test_too_few_points_and_bad_series_say_so():
    with pytest.raises(TooFewPoints, match="5 points after a warm-up of 1"):
        theil_sen([1, 2, 3, 4, 5, 6], [0] * 6, skip=1)
    with pytest.raises(ValueError, match="strictly"):
        theil_sen([1, 1, 2, 3, 4, 5, 6], [0] * 7)


def _timings(per_slice_tpot):
    out = []
    for i, tpot in enumerate(per_slice_tpot):
        for j in range(5):
            out.append(Timing(sent_s=i * 10 + j, e2e_s=0.5 + 9 * tpot, ttft_s=0.5, tokens=10, ok=True))
    return out


def test_timeslices_hold_the_requests_sent_in_them():
    slices = timeslices(_timings([0.01, 0.01, 0.02]), 0, 30, 3)
    assert [s.requests for s in slices] == [5, 5, 5]
    assert slices[0].tpot_p50 == pytest.approx(0.01) and slices[2].tpot_p50 == pytest.approx(0.02)
    assert slices[0].ttft_p50 == 0.5


def test_drift_is_the_last_slice_against_the_first():
    steady = drift(timeslices(_timings([0.01, 0.012, 0.011]), 0, 30, 3), {"tpot_p50": 1.5, "ttft_p50": 1.5})
    assert not steady.beyond
    slower = drift(timeslices(_timings([0.01, 0.015, 0.02]), 0, 30, 3), {"tpot_p50": 1.5, "ttft_p50": 1.5})
    assert slower.beyond == {"tpot_p50": pytest.approx(2.0)}


def test_goodput_counts_requests_within_the_slo_and_failures_as_bad():
    timings = _timings([0.01, 0.05])
    timings.append(Timing(sent_s=25, e2e_s=1.0, ttft_s=None, tokens=0, ok=False))
    assert goodput(timings, Slo(ttft_s=1.0, tpot_s=0.02, goodput=0.9)) == pytest.approx(5 / 11)
