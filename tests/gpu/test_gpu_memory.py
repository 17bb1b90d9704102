"""GPU check of the memory library, for a machine with an NVIDIA GPU (well
under 5 minutes): the NVML sampler on a torch allocation, the ballast
leaving a card profile's capacity free, the capacity check's two methods
agreeing, and teardown (ballast gone, device memory back, a held allocation
reported as a leak).

    .venv/bin/python -m pytest tests/gpu -v

Skips, with the reason, where NVML or CUDA is missing.
"""
from __future__ import annotations

import os
import time

import pytest

from harness.verdicts import Cause
from harness.memory.card import (Ballast, check_within_budget, emulation_unavailable_reason, engine_peak, get_profile,
                                 gpu_memory_utilization)
from harness.memory.card.capacity import PER_PROCESS
from harness.memory.nvml import Nvml
from harness.memory.samplers import NvmlSampler, engine_series, used_series
from harness.memory.samplers.leak import check_gpu_teardown, gpu_baseline
from harness.memory.samplers.nvml import PID_MISMATCH
from harness.units import GiB, MiB

_REASON = emulation_unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]



@pytest.fixture(scope="module")
def torch_cuda():
    import torch
    torch.cuda.init()
    torch.empty(1, device="cuda:0")  # create this process's context before any baseline
    return torch


@pytest.fixture(scope="module")
def nvml():
    with Nvml() as nvml:
        yield nvml


@pytest.fixture(scope="module")
def device(torch_cuda, nvml) -> int:
    """NVML index of torch's cuda:0, matched by UUID."""
    if nvml.device_count() == 1:
        return 0
    uuid = str(torch_cuda.cuda.get_device_properties(0).uuid)
    for index in range(nvml.device_count()):
        if uuid in str(nvml.nvml.nvmlDeviceGetUUID(nvml.handle(index))):
            return index
    pytest.fail(f"no NVML device has torch cuda:0's UUID {uuid}")


def settle(torch):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def test_nvml_sampler_sees_a_torch_allocation(torch_cuda, device):
    torch = torch_cuda
    sampler = NvmlSampler(os.getpid(), devices=[device], rate_hz=100).start()
    t_base = sampler.mark("base")
    block = torch.empty(2 * GiB, dtype=torch.uint8, device="cuda:0")
    settle(torch)
    t_held = sampler.mark("held")
    del block
    settle(torch)
    # transients: 1 GiB held 20 ms, freed before any mark; only the thread can see them
    spans = []
    for _ in range(5):
        block = torch.empty(GiB, dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()
        t0 = time.monotonic()
        time.sleep(0.020)
        t1 = time.monotonic()
        del block
        settle(torch)
        spans.append((t0, t1))
        time.sleep(0.05)
    t_end = sampler.mark("end")
    result = sampler.stop()

    used = used_series(device)
    at = {label: result.window(t, t).peak for t, label in result.marks}
    assert at["held"][used] - at["base"][used] >= 2 * GiB
    assert at["end"][used] - at["base"][used] < 64 * MiB
    caught = [result.window(t0, t1).peak[used] - at["base"][used] >= 0.95 * GiB for t0, t1 in spans]
    assert all(caught), f"20 ms transients caught: {caught} at {result.achieved_hz:.0f} Hz"
    print(f"memory info v{result.meta['memory_info_version']}, attribution {result.meta['attribution']}, "
          f"{result.achieved_hz:.0f} Hz, {100 * result.cpu_fraction:.2f}% of a core")
    if result.meta["attribution"][f"gpu{device}"].get(PID_MISMATCH):
        assert result.notes, "a PID mismatch must be explained in the record"
    else:
        engine = engine_series(device)
        assert at["held"][engine] - at["base"][engine] >= 2 * GiB
    assert t_base < t_held < t_end


def test_ballast_leaves_the_profile_free_and_the_capacity_check_agrees(torch_cuda, nvml, device):
    torch = torch_cuda
    profile = get_profile("l4-22g")
    before = nvml.memory(device)
    if before.free < profile.capacity_bytes + 2 * GiB:
        pytest.skip(f"{before.free / GiB:.1f} GiB free: too little to emulate {profile.id}")
    baseline_used = before.used
    with Ballast(profile.capacity_bytes, device=device) as ready:  # PCI order = NVML index
        with_ballast = nvml.memory(device)
        # the ballast's view and NVML's agree, and exactly the capacity is left
        assert profile.capacity_bytes <= ready.free_bytes <= profile.capacity_bytes + 32 * MiB
        assert abs(with_ballast.free - ready.free_bytes) < 64 * MiB
        listed = nvml.processes(device)
        print(f"ballast pid {ready.pid}; NVML lists {sorted(listed)}; free {with_ballast.free}")
        util = gpu_memory_utilization(profile, with_ballast.total)
        assert util * with_ballast.total == pytest.approx(profile.budget_bytes())

        # an "engine" (this process) uses 3 GiB within the emulated card
        ballast_bytes = with_ballast.used - baseline_used
        sampler = NvmlSampler(os.getpid(), devices=[device], own_pids=[ready.pid]).start()
        block = torch.empty(3 * GiB, dtype=torch.uint8, device="cuda:0")
        settle(torch)
        sampler.mark("held")
        del block
        settle(torch)
        result = sampler.stop()
        peak = engine_peak(result, device, baseline_used=baseline_used, ballast_bytes=ballast_bytes)
        check_within_budget(profile, peak)
        # device arithmetic counts only the 3 GiB (our context predates the baseline)
        arithmetic = result.peak[used_series(device)] - ballast_bytes - baseline_used
        assert abs(arithmetic - 3 * GiB) < 128 * MiB
        if peak.method == PER_PROCESS:
            assert peak.bytes >= 3 * GiB  # plus this process's context
        print(f"engine peak {peak}, arithmetic {arithmetic}")
    pid = ready.pid
    assert not os.path.exists(f"/proc/{pid}"), "ballast process survived"
    teardown = check_gpu_teardown({device: baseline_used}, uses=["gpu-check"], margin_bytes=64 * MiB,
                                  timeout_s=30, nvml=nvml)
    assert teardown.ok, teardown.message


def test_memory_still_held_is_reported_as_a_leak(torch_cuda, nvml, device):
    torch = torch_cuda
    baseline = gpu_baseline([device], nvml)
    block = torch.empty(GiB, dtype=torch.uint8, device="cuda:0")
    settle(torch)
    try:
        leak = check_gpu_teardown(baseline, uses=["held"], margin_bytes=64 * MiB, timeout_s=1,
                                  nvml=nvml)
        assert (leak.ok, leak.cause) == (False, Cause.LEAK)
        assert leak.evidence()["recoveries"][0]["excess"] >= GiB
    finally:
        del block
        settle(torch)
