"""Card profiles, the engine's gpu_memory_utilization, the capacity check
(NVML per-process peak or its device-used fallback), and the ballast's
failure path on a machine without CUDA. tests/gpu/ runs the ballast for real.

The fake NVML tests feed a stand-in pynvml module (the `fake_nvml` fixture)
to exercise only the fallback arithmetic and the reasons emulation cannot run."""
from __future__ import annotations

import sys

import psutil
import pytest

from harness.verdicts import Cause, CheckFailure
from harness.memory.card import (PROFILES, Ballast, BallastError, UnknownCard, after_load_record, check_within_budget,
                                 emulation_unavailable_reason, engine_peak, get_profile, gpu_memory_utilization)
from harness.memory.card.capacity import DEVICE_ARITHMETIC, PER_PROCESS, EnginePeak
from harness.memory.card.profiles import GiB
from harness.memory.samplers import NvmlSampler

H200_PHYSICAL = 150_754_820_096  # what NVML reports as total on an H200 (140.4 GiB)


def test_profile_table():
    assert {p.id: p.capacity_bytes // GiB for p in PROFILES.values()} == {
        "l4-22g": 22, "a10g-24g": 24, "a100-40g": 40, "a100-80g": 80, "h100-80g": 80,
        "h200-141g": 141}
    for p in PROFILES.values():
        assert 0 < p.typical_free_after_load_bytes < p.capacity_bytes
        assert p.budget_bytes() < p.capacity_bytes


def test_unknown_card_lists_the_known_ones():
    with pytest.raises(UnknownCard) as info:
        get_profile("rtx-4090")
    assert all(card in str(info.value) for card in PROFILES)
    assert get_profile("L4-22G") is PROFILES["l4-22g"]


def test_gpu_memory_utilization_gives_the_profile_budget_on_the_physical_card():
    l4 = get_profile("l4-22g")
    util = gpu_memory_utilization(l4, H200_PHYSICAL)
    assert util * H200_PHYSICAL == pytest.approx(0.9 * 22 * GiB)
    assert gpu_memory_utilization(l4, H200_PHYSICAL, fraction=1.0) * H200_PHYSICAL == pytest.approx(22 * GiB)
    with pytest.raises(ValueError, match="does not fit"):
        gpu_memory_utilization(get_profile("h200-141g"), 80 * GiB)


def test_after_load_record_puts_the_real_figure_beside_the_expected():
    l4 = get_profile("l4-22g")
    rec = after_load_record(l4, measured_free_bytes=12 * GiB)
    assert rec["expected_free_after_load_bytes"] == l4.typical_free_after_load_bytes
    assert rec["difference_bytes"] == 12 * GiB - l4.typical_free_after_load_bytes


def test_budget_check_holds_the_peak_to_the_budget_not_the_capacity():
    l4 = get_profile("l4-22g")
    budget = l4.budget_bytes()
    assert budget < l4.capacity_bytes
    check_within_budget(l4, EnginePeak(0, budget, PER_PROCESS))
    with pytest.raises(CheckFailure) as info:  # within the card, over the budget
        check_within_budget(l4, EnginePeak(0, budget + GiB, DEVICE_ARITHMETIC, "pid mismatch"))
    assert info.value.cause == Cause.OVER_BUDGET
    assert info.value.evidence["over_by_bytes"] == 1 * GiB
    assert info.value.evidence["budget_bytes"] == budget
    assert info.value.evidence["method"] == DEVICE_ARITHMETIC
    assert "budget" in info.value.message


def test_fake_nvml_engine_peak_per_process_when_pids_match(fake_nvml):
    me = psutil.Process().pid
    module = fake_nvml([60 * GiB], {me: 15 * GiB})
    result = NvmlSampler(me, nvml_module=module).start().stop()
    peak = engine_peak(result, 0, baseline_used=1 * GiB, ballast_bytes=40 * GiB)
    assert (peak.bytes, peak.method) == (15 * GiB, PER_PROCESS)


def test_fake_nvml_engine_peak_falls_back_to_device_arithmetic_on_pid_mismatch(fake_nvml):
    me = psutil.Process().pid
    module = fake_nvml([60 * GiB], {4_000_001: 15 * GiB})  # host-namespace pid only
    result = NvmlSampler(me, nvml_module=module).start().stop()
    peak = engine_peak(result, 0, baseline_used=1 * GiB, ballast_bytes=40 * GiB)
    assert (peak.bytes, peak.method) == (19 * GiB, DEVICE_ARITHMETIC)
    assert "pid-mismatch" in peak.note


def test_emulation_unavailable_reason_names_what_is_missing(fake_nvml, monkeypatch):
    import torch

    no_gpu, one_gpu = fake_nvml([0], {}, devices=0), fake_nvml([0], {})
    assert emulation_unavailable_reason(nvml_module=no_gpu) == \
        "card emulation needs NVML: NVML unavailable: no GPU device visible"
    # Another interpreter's torch is checked when the ballast starts, not here.
    assert emulation_unavailable_reason("/another/python", nvml_module=one_gpu) is None
    assert emulation_unavailable_reason(nvml_module=one_gpu) == (
        None if torch.cuda.is_available()
        else f"card emulation needs torch with CUDA; torch {torch.__version__} sees no CUDA device")
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails
    assert emulation_unavailable_reason(nvml_module=one_gpu) == \
        "card emulation needs torch for the ballast, and it is not installed"


def test_ballast_without_cuda_fails_clearly_and_leaves_no_process():
    if emulation_unavailable_reason() is None:
        pytest.skip("CUDA is here; tests/gpu runs the ballast for real")
    ballast = Ballast(leave_free_bytes=22 * GiB, ready_timeout_s=60)
    with pytest.raises(BallastError, match="did not become ready") as info:
        ballast.start()
    assert "Traceback" in str(info.value)  # the child's stderr is in the message
    assert ballast.pid is None  # torn down
