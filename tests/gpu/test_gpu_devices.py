"""GPU check of GPU-aware scheduling (harness/engines/devices.py and the
engine pool), for a machine with an NVIDIA GPU, in about a minute: the
run's ledger over this machine's GPUs, CUDA_VISIBLE_DEVICES as a real child
process sees it, the GPUs of a stopped process coming back only once NVML
shows its real CUDA allocation freed, and a GPU still held by a live process
reported as a leak against its scenario and taken out of the run; a card's
ballast on its leased GPU.

    .venv/bin/python -m pytest tests/gpu/test_gpu_devices.py -v

The engine here is a stand-in that holds a real CUDA allocation in a child
process (no vLLM needed); the pool, ledger, NVML and leak check are the
harness's own. Skips, with the reason, where NVML or torch with CUDA is
missing.
"""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.verdicts import Cause, Verdict
from harness.engines import pool as pool_mod
from harness.engines.devices import DeviceLedger, NoDeviceLeft, run_devices
from harness.engines.interpreter import EngineInterpreter
from harness.engines.parallel import NotHostable
from harness.engines.pool import EnginePool
from harness.schedule.placement import GpuLeases
from harness.memory.card import emulation_unavailable_reason, get_profile
from harness.memory.card.emulation import card_answer
from harness.memory.nvml import Nvml
from harness.plugins.card import _Ballasts
from harness.engines.teardown import teardown_record
from harness.units import GiB, MiB

_REASON = emulation_unavailable_reason()  # NVML, and torch with CUDA in this interpreter
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

HOLD_BYTES = 2 * GiB
# Holds HOLD_BYTES on the one device it sees until its stdin closes; reports
# what it saw first.
HOLDER = """
import sys, torch
print(torch.cuda.device_count(), torch.cuda.get_device_properties(0).uuid, flush=True)
block = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


class CudaHolder:
    """An engine stand-in: one child process holding a real CUDA allocation
    on the GPUs its environment shows it. `keep_holding`: close() leaves the
    child alive, as a crashed engine's orphan would."""
    kind = "offline"
    keep_holding = False

    def __init__(self, model, engine_args, interpreter, log_path, *, name, env, **_):
        self.env, self.name, self.log_path = env, name, log_path
        self.crashed, self.ready, self.identity = None, False, {"distribution": "cuda-holder"}

    def start(self):
        self.popen = subprocess.Popen([sys.executable, "-c", HOLDER, str(HOLD_BYTES)],
                                      env={**os.environ, **self.env}, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        count, uuid = self.popen.stdout.readline().split()
        self.seen = (int(count), uuid)
        assert self.popen.stdout.readline().strip() == "ready"
        self.proc = SimpleNamespace(pid=self.popen.pid, death=self.popen.poll)
        self.ready = True
        return self

    def close(self, grace):
        self.ready = False
        if not self.keep_holding:
            self.popen.stdin.close()
            self.popen.wait(60)
        return []

    def settle(self):
        pass

    def kill(self):
        self.popen.kill()
        self.popen.wait(60)


@pytest.fixture(scope="module")
def devices() -> list[int]:
    return run_devices()


@pytest.fixture
def pool(tmp_path, monkeypatch, devices):
    """A GPU-tier pool over this machine's last GPU, starting CUDA holders."""
    monkeypatch.setattr(pool_mod, "OfflineEngine", CudaHolder)
    monkeypatch.setattr(CudaHolder, "keep_holding", False)
    pool = EnginePool(EngineInterpreter(tier="gpu"), tmp_path / "engines", leak_wait_s=10,
                      placement=GpuLeases(DeviceLedger(tmp_path / "devices.json", devices[-1:])))
    yield pool
    pool.close_all()


def nvml_uuid(index: int) -> str:
    with Nvml() as nvml:
        value = nvml.nvml.nvmlDeviceGetUUID(nvml.handle(index))
    return value.decode() if isinstance(value, bytes) else value


def used(index: int) -> int:
    with Nvml() as nvml:
        return nvml.memory(index).used


def test_the_ledger_hands_out_each_gpu_once(tmp_path, devices):
    ledger = DeviceLedger(tmp_path / "devices.json", devices)
    leases = [ledger.try_acquire(1, f"s{i}") for i in range(len(devices))]
    assert sorted(d for lease in leases for d in lease.devices) == devices
    assert ledger.try_acquire(1, "one more") is None
    with pytest.raises(NotHostable, match=f"this run has {len(devices)}"):
        ledger.try_acquire(len(devices) + 1, "too many")


def test_a_child_sees_its_leased_gpu_only(pool, devices):
    engine = pool.get(pool.spec("offline", "m", name="m"), label="s-visible").engine
    count, uuid = engine.seen
    assert count == 1
    assert uuid.removeprefix("GPU-") in nvml_uuid(devices[-1])


def test_the_gpu_comes_back_once_a_real_allocation_is_freed(pool, devices):
    device = devices[-1]
    before = used(device)
    pool.get(pool.spec("offline", "m", name="m"), label="s-freed").engine
    assert used(device) - before >= HOLD_BYTES
    [entry] = pool.release_since(0)
    verdict = entry.leak_verdict
    assert verdict.ok and entry.taken_out == [], verdict.message
    assert used(device) - before < verdict.recoveries[0].margin
    assert pool.placement.ledger.state()["held"] == {} and pool.placement.ledger.lost() == {}
    assert pool.get(pool.spec("offline", "m", name="m"), label="s-next").engine.seen[0] == 1


def test_a_gpu_a_live_process_still_holds_is_a_leak_and_out_of_the_run(pool, devices, monkeypatch):
    monkeypatch.setattr(CudaHolder, "keep_holding", True)
    pool.leak_wait_s = 3.0
    engine = pool.get(pool.spec("offline", "m", name="m"), label="s-leaky").engine
    try:
        [entry] = pool.release_since(0)
        record = teardown_record(entry)
        assert (record.verdict, record.cause) == (Verdict.FAIL.value, Cause.LEAK.value)
        assert "served: s-leaky" in record.message and f"gpu{devices[-1]}" in record.message
        assert entry.taken_out == [devices[-1]]
        with pytest.raises(NoDeviceLeft, match="served: s-leaky"):
            pool.get(pool.spec("offline", "m", name="m"), label="s-after").engine
    finally:
        engine.kill()


def test_a_cards_ballast_holds_its_leased_gpu_and_gives_it_back(pool, devices):
    """The card plugin's ballast: it leases a whole GPU, sees only it (as
    CUDA device 0) and leaves the profile's capacity free there; once it
    stops, the GPU goes back to the run with its memory at the baseline."""
    device = devices[-1]
    profile = get_profile("l4-22g")
    with Nvml() as nvml:
        if nvml.memory(device).free < profile.capacity_bytes + 2 * GiB:
            pytest.skip(f"gpu{device} has too little free memory to emulate {profile.id}")
    ballasts = _Ballasts(sys.executable, pool)
    try:
        card = ballasts.start(profile, card_answer(profile), holder=f"card {profile.id} for m")
        assert card.emulating and card.device == device and ballasts.lease.devices == (device,)
        with Nvml() as nvml:
            assert abs(nvml.memory(device).free - card.ready.free_bytes) < 64 * MiB
        assert pool.placement.ledger.state()["held"][str(device)]["holder"] == f"card {profile.id} for m"
    finally:
        ballasts.close()
    assert pool.placement.ledger.state()["held"] == {} and pool.placement.ledger.lost() == {}
