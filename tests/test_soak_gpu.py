"""On the GPU tier the soak reads each engine process's device memory
after each wave beside its resident memory (NVML, here a stand-in with
pynvml's functions): the processes NVML lists, by the engine's names for
them, summed over the engine's devices; a steady climb there is a leak
named by the process and its device memory."""
import itertools
from types import SimpleNamespace

import pytest

from harness.checks.soak import check_no_leak
from harness.verdicts import Cause, CheckFailure
from harness.memory.nvml import Nvml
from harness.soak import drive as soak_drive
from harness.soak.drive import gpu_reader, process_gpu
from tests.test_soak_checks import MIX, SETTINGS, answer

MIB = 2**20
# Pids no process here has: their resident memory is not read, only NVML's figures.
SERVER, CORE, WORKER, OTHER = 2**22 + 1, 2**22 + 2, 2**22 + 3, 2**22 + 4


class Engine:
    """Answers every wave at once, and its worker's device memory grows by
    `climb_mib` per request (what NVML then lists)."""

    def __init__(self, listed: dict, climb_mib: float):
        self.proc = SimpleNamespace(pid=SERVER, seen={}, vital={
            SERVER: "APIServer", CORE: "VLLM::EngineCore", WORKER: "VLLM::Worker"})
        self.listed, self.climb_mib = listed, climb_mib

    def chat_streamed(self, conversations, sampling, adapters=None):
        self.listed[WORKER] += int(self.climb_mib * MIB * len(conversations))
        return [answer() for _ in conversations]


def test_device_memory_is_named_by_the_engines_processes_and_summed_over_its_devices(fake_nvml):
    engine = Engine({}, 0)
    nvml = Nvml(fake_nvml(used=[0], processes={CORE: 300 * MIB, WORKER: 4096 * MIB, OTHER: 999 * MIB,
                                              SERVER: None}, devices=2))
    assert process_gpu(engine, nvml, [0, 1]) == {"gpu VLLM::EngineCore[%d]" % CORE: 600.0,
                                                 "gpu VLLM::Worker[%d]" % WORKER: 8192.0}
    assert process_gpu(engine, nvml, [1]) == {"gpu VLLM::EngineCore[%d]" % CORE: 300.0,
                                              "gpu VLLM::Worker[%d]" % WORKER: 4096.0}


def test_a_climb_in_a_workers_device_memory_is_a_leak_named_by_it(fake_nvml, monkeypatch):
    listed = {CORE: 300 * MIB, WORKER: 4096 * MIB}
    fake = fake_nvml(used=[0], processes=listed)
    monkeypatch.setattr(soak_drive, "Nvml", lambda: Nvml(fake))
    engine = Engine(listed, climb_mib=0.2)  # 200 MiB per 1,000 requests
    # The soak's clock ticks a millisecond a reading, not with the machine's
    # load: 0.2 s is always the same number of waves.
    ticks = itertools.count()
    monkeypatch.setattr(soak_drive.time, "monotonic", lambda: next(ticks) / 1000)
    with gpu_reader(engine, None) as gpu:
        soak = soak_drive.drive(engine, MIX, None, 0.2, gpu=gpu)
    assert len(soak.readings) > 20 and soak.readings[-1].requests > 4 * SETTINGS.warmup_requests
    with pytest.raises(CheckFailure) as failed:
        check_no_leak(soak, SETTINGS)
    assert failed.value.cause == Cause.LEAK
    assert failed.value.message.startswith(f"gpu VLLM::Worker[{WORKER}] grew +200.00"), failed.value.message
    assert failed.value.evidence["fits"][f"gpu VLLM::EngineCore[{CORE}]"]["verdict"] == "flat"
