"""The soak's load and checks without an engine: the mix is seeded and
holds its pair, new and repeated media; each check fails with its own
cause on a crafted soak (a crash, a climb, a slowdown, a missed SLO), and
the tier settings refuse what they cannot mean."""
import pytest

from harness.checks.soak import check_answered, check_goodput, check_no_drift, check_no_leak, sampled_waves
from harness.verdicts import Cause, CheckFailure
from harness.engines.base import LoraAdapter
from harness.engines.outcomes import Completion, EngineCrashed, Rejected
from harness.soak.drive import Reading, Soak, Wave
from harness.soak.latency import Slo
from harness.soak.load import SoakMix
from harness.soak.settings import SoakSettings, for_tier, parse

SETTINGS = SoakSettings(concurrency=4, warmup_requests=20, timeslices=4, leak_mib_per_1k_requests=50,
                        drift={"ttft_p50": 2.0, "tpot_p50": 2.0}, slo=Slo(ttft_s=1.0, tpot_s=0.1, goodput=0.9))
MIX = SoakMix(4, frozenset({"text", "image", "audio"}))


def answer(ttft=0.2, tpot=0.02, tokens=16):
    return Completion(text="x", token_ids=list(range(tokens)), ttft_s=ttft, e2e_s=ttft + tpot * (tokens - 1))


def crafted(waves=40, *, rss=lambda n: 1000.0, tpot=lambda i: 0.02, last=None) -> Soak:
    """A soak of `waves` waves a second apart, 4 answers each; memory read
    after each wave by `rss(requests served)`."""
    soak = Soak(seconds=float(waves))
    for i in range(waves):
        outcomes = [answer(tpot=tpot(i)) for _ in range(4)]
        if last is not None and i == waves - 1:
            outcomes[-1] = last
        soak.waves.append(Wave(i, MIX.wave(i), float(i), outcomes))
        served = 4 * (i + 1)
        soak.readings.append(Reading(served, i + 0.9, {"api-server": rss(served), "EngineCore[2]": 900.0}))
    soak.elapsed_s = float(waves)
    return soak


def test_the_mix_is_seeded_with_a_pair_new_and_repeated_media_in_every_wave():
    a, b = MIX.wave(5), SoakMix(4, frozenset({"text", "image", "audio"})).wave(5)
    assert a == b and a.labels == ["w5-pair-a", "w5-pair-b", "w5-new", "w5-repeat"]
    pair = a.requests[:2]
    assert pair[0].conversation[-1]["content"][-1] == pair[1].conversation[-1]["content"][-1]  # one prompt
    assert pair[0].conversation != pair[1].conversation  # two media items
    repeats = [MIX.wave(i).requests[3] for i in range(8)]
    media = [r.conversation[-1]["content"][0] for r in repeats]
    assert len({str(m) for m in media}) == 3  # the same three items come back
    assert {r.facts["modality"] for i in range(4) for r in MIX.wave(i).requests} == {"image", "audio"}


def test_given_an_adapter_requests_switch_models_in_every_wave_and_the_pair_shares_one():
    lm = LoraAdapter("lm", "/adapters/lm", 1)
    mix = SoakMix(4, frozenset({"text", "image", "audio"}), adapters=(lm,))
    for index in range(6):
        wave = mix.wave(index)
        models = [r.adapter for r in wave.requests]
        assert models[0] is models[1], wave.labels  # the pair: one prompt, one model, two media items
        assert set(models) == {None, lm}, models  # base and adapter in every wave
        assert [r.facts["adapter"] for r in wave.requests] == [m.name if m else "base" for m in models]
        assert wave.adapters == models
        assert [r.adapter for r in mix.wave(index + 1).requests] != models  # and each role switches
    assert MIX.wave(3).adapters is None and "adapter" not in MIX.wave(3).requests[0].facts  # no LoRA: as before


def test_a_mix_needs_a_pair_and_media():
    with pytest.raises(ValueError, match="2 or more"):
        SoakMix(1, frozenset({"image"}))
    with pytest.raises(ValueError, match="images or audio"):
        SoakMix(4, frozenset({"text"}))


def test_a_healthy_soak_passes_every_check():
    soak = crafted()
    assert check_answered(soak)["requests"] == 160
    assert check_no_leak(soak, SETTINGS)["fits"]["api-server"]["verdict"] == "flat"
    assert check_no_drift(soak, SETTINGS)["drift"]["tpot_p50"] == pytest.approx(1.0)
    assert check_goodput(soak, SETTINGS)["goodput"] == 1.0
    assert sampled_waves(soak, SETTINGS) == [5, 14, 23, 31]  # one per timeslice of waves 5-39 (after 20 requests)


def test_a_crash_fails_every_check_with_its_cause():
    crash = EngineCrashed(cause=Cause.HANG, detail="w39-repeat: no progress for 180 s")
    soak = crafted()
    soak.stopped = crash
    for check in (check_answered, lambda s: check_no_leak(s, SETTINGS), lambda s: check_no_drift(s, SETTINGS),
                  lambda s: check_goodput(s, SETTINGS), lambda s: sampled_waves(s, SETTINGS)):
        with pytest.raises(CheckFailure) as failed:
            check(soak)
        assert failed.value.cause == Cause.HANG and "no progress for 180 s" in failed.value.message


def test_an_unanswered_request_fails_with_its_status():
    soak = crafted(last=Rejected(status=400, message="bad image"))
    with pytest.raises(CheckFailure) as failed:
        check_answered(soak)
    assert failed.value.cause == Cause.HTTP_4XX and "w39-repeat" in failed.value.message


def test_a_steady_climb_in_one_process_is_a_leak_named_by_its_process():
    soak = crafted(rss=lambda n: 1000.0 + 0.2 * n)  # 200 MiB per 1,000 requests
    with pytest.raises(CheckFailure) as failed:
        check_no_leak(soak, SETTINGS)
    assert failed.value.cause == Cause.LEAK and failed.value.message.startswith("api-server grew +200.00")
    assert failed.value.evidence["fits"]["EngineCore[2]"]["verdict"] == "flat"


def test_a_slowdown_is_a_drift_and_misses_the_slo():
    soak = crafted(tpot=lambda i: 0.02 * (1 + i / 8))  # 5.9x slower by the last wave
    with pytest.raises(CheckFailure) as failed:
        check_no_drift(soak, SETTINGS)
    assert failed.value.cause == Cause.DRIFT and "tpot_p50 x" in failed.value.message
    with pytest.raises(CheckFailure) as missed:
        check_goodput(soak, SETTINGS)
    assert missed.value.cause == Cause.SLO


def test_a_soak_too_short_for_its_warm_up_fails_its_premise():
    soak = crafted(waves=4)
    for check in (lambda s: check_no_leak(s, SETTINGS), lambda s: check_no_drift(s, SETTINGS),
                  lambda s: sampled_waves(s, SETTINGS)):
        with pytest.raises(CheckFailure) as failed:
            check(soak)
        assert failed.value.cause == Cause.PREMISE


def test_timeslices_left_empty_fail_the_drift_premise_rather_than_pass():
    # Two waves after the warm-up, alike, the second 25 s later: slices 1 and 2 hold nothing.
    soak = crafted(waves=7)
    soak.waves[-1] = Wave(6, MIX.wave(6), 30.0, soak.waves[-1].outcomes)
    with pytest.raises(CheckFailure) as failed:
        check_no_drift(soak, SETTINGS)
    assert failed.value.cause == Cause.PREMISE, failed.value.message
    assert failed.value.message.endswith("2 of 4 have no answer"), failed.value.message


def test_the_tiers_settings_parse_and_bad_ones_are_named():
    assert for_tier("cpu").concurrency >= 2
    good = {"concurrency": 4, "warmup_requests": 10, "timeslices": 3, "leak_mib_per_1k_requests": 5,
            "drift": {"ttft_p50": 1.5, "tpot_p50": 1.5}, "slo": {"ttft_s": 1, "tpot_s": 0.1, "goodput": 0.9}}
    assert parse(good, "x").slo == Slo(1.0, 0.1, 0.9)
    for bad, says in (({**good, "extra": 1}, "exactly"), ({**good, "concurrency": 1}, "concurrency"),
                      ({**good, "drift": {"ttft_p50": 0.5, "tpot_p50": 1.5}}, "ratio > 1"),
                      ({**good, "slo": {"ttft_s": 1, "tpot_s": 0.1, "goodput": 2}}, "share"),
                      ({**good, "leak_mib_per_1k_requests": 0}, "leak")):
        with pytest.raises(ValueError, match=says):
            parse(bad, "[tiers.cpu.soak]")
