"""GPU-aware scheduling without a GPU: the run's device ledger over 1, 2, 4
and 8 devices with TP mixes, workers in separate processes never sharing a
device, and the engine pool on a fake NVML (tests/conftest.py) with a
stand-in engine that holds memory on the devices its environment shows it:
GPUs go back only once their memory has, and one that does not recover is a
leak against the scenario that held it and is out of the run.

tests/gpu/test_gpu_devices.py checks the same on a real GPU."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.verdicts import Cause, Verdict
from harness.engines import pool as pool_mod
from harness.engines.devices import VISIBLE_ENV, DeviceLedger, Lease, NoDeviceLeft, run_devices
from harness.engines.interpreter import EngineInterpreter
from harness.engines.outcomes import EngineCrashed, EngineStartupFailed
from harness.engines.parallel import BIND_ENV, TP_ARG, NotHostable
from harness.engines.pool import EnginePool, EngineSpec, EngineHandle
from harness.engines.teardown import teardown_record
from harness.schedule.placement import SHUTDOWN_GRACE_ENV, CpuTurn, GpuLeases, slot_cores
from harness.units import GiB

TP_MIX = [1, 2, 1, 4, 8, 2]
# What each device count hands the mix above, lowest free devices first;
# a size over the count is never hostable, one over what is free waits.
GRANTED = {1: [(0,)], 2: [(0,), (1,)], 4: [(0,), (1, 2), (3,)], 8: [(0,), (1, 2), (3,), (4, 5, 6, 7)]}


@pytest.mark.parametrize("count", [1, 2, 4, 8])
def test_a_tp_mix_gets_disjoint_devices_until_none_are_free(tmp_path, count):
    ledger = DeviceLedger(tmp_path / "devices.json", list(range(count)))
    leases = []
    for tp in TP_MIX:
        if tp > count:
            with pytest.raises(NotHostable, match=f"needs {tp} GPU\\(s\\); this run has {count}"):
                ledger.try_acquire(tp, f"tp{tp}")
        elif lease := ledger.try_acquire(tp, f"tp{tp}"):
            leases.append(lease)
    assert [lease.devices for lease in leases] == GRANTED[count]
    for lease in leases:
        ledger.release(lease)
    assert ledger.try_acquire(count, "all").devices == tuple(range(count))


def test_the_lease_shows_a_process_its_devices_only(tmp_path):
    lease = DeviceLedger(tmp_path / "devices.json", [0, 1, 2, 3]).try_acquire(2, "s")
    assert lease.env() == {VISIBLE_ENV: "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    seen = subprocess.run([sys.executable, "-c", f"import os; print(os.environ['{VISIBLE_ENV}'])"],
                          env=lease.env(), capture_output=True, text=True, check=True).stdout
    assert seen.strip() == "0,1"


def test_run_devices_come_from_cuda_visible_devices_or_nvml():
    assert run_devices({VISIBLE_ENV: "2,3"}) == [2, 3]
    assert run_devices({}, count=lambda: 4) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="not UUIDs"):
        run_devices({VISIBLE_ENV: "GPU-8e2f"})


def _worker(path: str, devices: list[int], log: str, hold_s: float) -> None:
    ledger = DeviceLedger(path, devices, poll_s=0.01)
    lease = ledger.acquire(1, "worker", wait_s=30)
    start = time.monotonic()
    time.sleep(hold_s)
    with open(log, "a") as f:  # one short line: appends do not interleave
        f.write(f"{lease.devices[0]} {start} {time.monotonic()}\n")
    ledger.release(lease)


@pytest.mark.parametrize("devices", [[0, 1], [0]], ids=["two-gpus", "cpu-turn"])
def test_parallel_workers_never_hold_one_device_together(tmp_path, devices):
    """Six processes (xdist workers) over the devices: on one device the
    holds never overlap, and every worker got its turn."""
    log = tmp_path / "holds.txt"
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_worker, args=(str(tmp_path / "devices.json"), devices, str(log), 0.05))
               for _ in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert [w.exitcode for w in workers] == [0] * 6
    holds = sorted(tuple(float(x) for x in line.split()) for line in log.read_text().splitlines())
    assert len(holds) == 6
    for device in devices:
        spans = [(s, e) for d, s, e in holds if d == device]
        assert all(prev[1] <= nxt[0] for prev, nxt in zip(spans, spans[1:])), spans


def _holds_then_wants_another(path: str, barrier, log: str) -> None:
    ledger = DeviceLedger(path, [0, 1], poll_s=0.01)
    first = ledger.try_acquire(1, "card")
    barrier.wait()
    try:
        ledger.acquire(1, "engine", wait_s=20)
        outcome = "got"
    except NotHostable as e:
        outcome = "deadlock" if "waits too" in str(e) else str(e)
    with open(log, "a") as f:
        f.write(outcome + "\n")
    time.sleep(0.2)
    ledger.release(first)


def test_workers_each_waiting_for_the_others_gpu_skip_instead_of_waiting_out(tmp_path):
    """Two workers each hold a GPU (a card) and want one more: at least one
    sees the deadlock at once, gives up, and the other then gets its GPU."""
    log, ctx = tmp_path / "outcomes.txt", multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    started = time.monotonic()
    workers = [ctx.Process(target=_holds_then_wants_another, args=(str(tmp_path / "d.json"), barrier, str(log)))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    outcomes = sorted(log.read_text().split())
    assert "deadlock" in outcomes and set(outcomes) <= {"deadlock", "got"}, outcomes
    assert time.monotonic() - started < 10


def test_a_dead_holders_devices_are_free_again(tmp_path):
    path = tmp_path / "devices.json"
    child = multiprocessing.get_context("fork").Process(
        target=lambda: DeviceLedger(path, [0]).try_acquire(1, "crashed worker"))
    child.start()
    child.join(30)
    assert DeviceLedger(path, [0]).state()["held"]["0"]["holder"] == "crashed worker"
    assert DeviceLedger(path, [0]).try_acquire(1, "next").devices == (0,)


def test_devices_taken_out_shrink_the_run_then_nothing_is_left(tmp_path):
    ledger = DeviceLedger(tmp_path / "devices.json", [0, 1])
    ledger.release(ledger.try_acquire(1, "s1"), lost={0: "leaked by s1"})
    with pytest.raises(NotHostable, match="1 taken out \\(gpu0 taken out: leaked by s1\\)"):
        ledger.try_acquire(2, "tp2")
    lease = ledger.try_acquire(1, "s2")
    assert lease.devices == (1,)
    # held by this same worker: waiting would never end
    with pytest.raises(NotHostable, match="1 held by this worker"):
        ledger.acquire(1, "s3", wait_s=5)
    ledger.release(lease, lost={1: "leaked by s2"})
    with pytest.raises(NoDeviceLeft, match="gpu0 taken out: leaked by s1; gpu1 taken out: leaked by s2"):
        ledger.try_acquire(1, "s4")


# --- the engine pool on a fake NVML --------------------------------------------------

BASE, HELD = 1 * GiB, 20 * GiB


class GpuStandIn:
    """An engine that holds HELD bytes on every fake device its environment
    shows it, from start to close, and keeps holding on those in `leaky`.
    Its process is a real child, so the leak check sees a real exit."""
    kind = "offline"
    used: dict[int, list[int]] = {}
    leaky: set[int] = set()
    lingering = 0
    fail_start = False
    port_races = 0  # starts that lose the port race before touching a GPU

    def __init__(self, model, engine_args, interpreter, log_path, *, name, env, **_):
        self.env, self.name, self.log_path = env, name, log_path
        self.crashed, self.ready, self.identity = None, False, {"distribution": "stand-in"}

    @property
    def devices(self) -> list[int]:
        return [int(d) for d in self.env[VISIBLE_ENV].split(",")]

    def start(self):
        if GpuStandIn.port_races:
            GpuStandIn.port_races -= 1
            raise EngineStartupFailed(EngineCrashed(Cause.STARTUP_FAILED, detail="OSError: [Errno 98] error while "
                                                    "attempting to bind on address: address already in use"))
        for d in self.devices:
            self.used[d][:] = [BASE + HELD]
        if self.fail_start:  # it died while loading, leaving its memory held
            raise EngineStartupFailed(EngineCrashed(Cause.OOM, detail="CUDA out of memory"))
        self.popen = subprocess.Popen(["sleep", "60"])
        self.proc = SimpleNamespace(pid=self.popen.pid, death=self.popen.poll)
        self.ready = True
        return self

    def close(self, grace):
        self.popen.kill()
        self.popen.wait()
        for d in self.devices:
            if d not in self.leaky:  # back after `lingering` reads
                self.used[d][:] = [BASE + HELD] * self.lingering + [BASE]
        self.ready = False
        return []

    def settle(self):
        pass


@pytest.fixture
def gpu_pool(tmp_path, monkeypatch, fake_nvml):
    """An engine pool over 2 fake GPUs with a ledger, starting stand-ins."""
    GpuStandIn.used = {0: [BASE], 1: [BASE]}
    GpuStandIn.leaky, GpuStandIn.lingering, GpuStandIn.fail_start, GpuStandIn.port_races = set(), 0, False, 0
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(GpuStandIn.used, {}, devices=2))
    monkeypatch.setattr(pool_mod, "OfflineEngine", GpuStandIn)
    interpreter = EngineInterpreter(tier="gpu")
    pool = EnginePool(interpreter, tmp_path / "engines", leak_wait_s=0.3,
                      placement=GpuLeases(DeviceLedger(tmp_path / "devices.json", [0, 1])))
    yield pool
    pool.close_all()


def handle(pool, args=None, *, label, name, gpus=1, lease=None, env=None):
    """The handle of an offline engine of model "m" with these arguments."""
    return pool.get(pool.spec("offline", "m", args, env, name), label=label, gpus=gpus, lease=lease)


def test_an_engine_runs_on_its_own_gpus_and_makes_room_from_this_worker(gpu_pool, monkeypatch):
    """The GPUs go back to the ledger only once NVML shows them at their
    baseline: here memory lingers for a few reads after the engine closed."""
    at_release = []
    release = gpu_pool.placement.ledger.release
    monkeypatch.setattr(gpu_pool.placement.ledger, "release", lambda lease, lost=None: (
        at_release.append({d: list(GpuStandIn.used[d]) for d in lease.devices}), release(lease, lost))[1])
    GpuStandIn.lingering, gpu_pool.leak_wait_s = 2, 10.0
    one = handle(gpu_pool, label="s1", name="tp1")
    assert one.engine.env[VISIBLE_ENV] == "0"
    two = handle(gpu_pool, {"tensor_parallel_size": 2}, label="s2", name="tp2", gpus=2)
    # TP 2 needs both GPUs: this worker's TP 1 engine was retired, and its GPU came back first
    assert two.engine.env[VISIBLE_ENV] == "0,1"
    assert one.evicted and not one.engine.ready and not two.evicted
    [retired] = gpu_pool.retired
    assert retired.leak_verdict.ok and retired.taken_out == []
    assert at_release == [{0: [BASE]}] and retired.leak_verdict.recoveries[0].waited_s > 0


def test_a_gpu_that_does_not_recover_is_a_leak_of_its_scenario_and_out_of_the_run(gpu_pool, tmp_path):
    engine = handle(gpu_pool, {"tensor_parallel_size": 2}, label="s-tp2", name="tp2", gpus=2).engine
    GpuStandIn.leaky = {1}
    [entry] = gpu_pool.release_since(0)
    assert entry.engine is engine and entry.taken_out == [1]
    record = teardown_record(entry)
    assert (record.verdict, record.cause) == (Verdict.FAIL.value, Cause.LEAK.value)
    assert "served: s-tp2" in record.message and "taken out of the run: gpu1" in record.message
    assert record.evidence["gpus"] == [0, 1] and record.evidence["taken_out_of_run"] == [1]
    # gpu0 came back; gpu1 is out for the rest of the run
    with pytest.raises(NotHostable, match="gpu1 taken out: memory not back after engine .*served: s-tp2"):
        handle(gpu_pool, {"tensor_parallel_size": 2}, label="s-again", name="tp2", gpus=2)
    assert handle(gpu_pool, label="s-tp1", name="tp1").engine.env[VISIBLE_ENV] == "0"
    GpuStandIn.leaky = {0, 1}
    gpu_pool.release_since(0)
    with pytest.raises(NoDeviceLeft, match="no GPU left"):
        handle(gpu_pool, label="s-last", name="tp1")


def test_an_engine_that_failed_to_start_gives_its_gpus_back_only_once_its_memory_is(gpu_pool):
    GpuStandIn.fail_start = True
    with pytest.raises(EngineStartupFailed):
        handle(gpu_pool, label="s-oom", name="m")
    [entry] = gpu_pool.retired
    assert entry.served == ["s-oom"] and entry.taken_out == [0]
    assert "served: s-oom" in teardown_record(entry).message
    assert gpu_pool.placement.ledger.lost() == {0: "memory not back after engine 01-offline-m (served: s-oom)"}


def test_a_retried_start_gives_its_lease_back_and_takes_its_own(gpu_pool):
    """The pool retries a lost port race once (harness.engines.retry): the
    failed start's GPUs go back to the ledger after its leak check, and the
    retry leases its own, which its engine gives back when retired."""
    GpuStandIn.port_races = 1
    up = handle(gpu_pool, label="s-race", name="m")
    engine = up.engine
    assert engine.ready and engine.env[VISIBLE_ENV] == "0"
    [failed] = gpu_pool.retired
    assert failed.served == ["s-race"] and failed.taken_out == [] and failed.engine is not engine
    [attempt] = up.attempts
    assert attempt["retried"] == "port race" and attempt["log"] == str(failed.engine.log_path)
    assert list(gpu_pool.handles.values()) == [up] and up.lease is not failed.lease
    held = gpu_pool.placement.ledger.state()["held"]  # the failed start's GPU came back; only the retry's is held
    assert list(held) == ["0"] and held["0"]["holder"] == "s-race" and gpu_pool.placement.ledger.lost() == {}
    gpu_pool.release_since(0)
    assert gpu_pool.placement.ledger.state()["held"] == {} and gpu_pool.placement.ledger.lost() == {}
    assert teardown_record(up).evidence["start_attempts"] == [attempt]


def test_a_card_lease_is_shared_by_its_engines_one_at_a_time(gpu_pool):
    lease = gpu_pool.card_lease("card l4-22g for m")
    first = handle(gpu_pool, {"gpu_memory_utilization": 0.3}, label="c1", name="m", lease=lease)
    ref = handle(gpu_pool, {"gpu_memory_utilization": 0.3, "enable_prefix_caching": False},
                 label="c2", name="m", lease=lease)
    assert first.engine.env[VISIBLE_ENV] == ref.engine.env[VISIBLE_ENV] == str(lease.devices[0])
    assert not first.engine.ready and first.evicted
    # the card's GPU stays the card's until it gives it back
    assert gpu_pool.placement.ledger.state()["held"][str(lease.devices[0])]["holder"] == "card l4-22g for m"
    gpu_pool.return_card(lease, {lease.devices[0]: BASE})
    assert gpu_pool.placement.ledger.state()["held"] == {} and gpu_pool.placement.ledger.lost() == {}


def test_the_cpu_tier_holds_one_engine_turn_while_its_engines_are_up(tmp_path, monkeypatch):
    monkeypatch.setattr(pool_mod, "OfflineEngine", GpuStandIn)
    GpuStandIn.used = {0: [BASE]}
    turn = DeviceLedger.turn(tmp_path / "engine-turn.json")
    pool = EnginePool(EngineInterpreter(tier="cpu"), tmp_path / "engines", watch_memory=False, placement=CpuTurn(turn))
    engine = handle(pool, label="s1", name="m", env={VISIBLE_ENV: "0"}).engine
    handle(pool, {"x": 1}, label="s2", name="m", env={VISIBLE_ENV: "0"})
    assert set(turn.state()["held"]) == {"0"} and engine.env == {VISIBLE_ENV: "0"}  # no GPUs given
    pool.release_since(0)
    assert turn.state()["held"] == {}


def test_a_tp_engine_gets_the_longer_exit_grace_with_every_slot_its_own(tmp_path, monkeypatch):
    """A worker holding every slot cannot see an engine of another run
    beside it (a scenario run that a test of `make test` starts): a TP
    engine's ranks get their longer grace to exit all the same."""
    monkeypatch.setattr(pool_mod, "OfflineEngine", GpuStandIn)
    GpuStandIn.used = {0: [BASE]}
    pool = EnginePool(EngineInterpreter(tier="cpu"), tmp_path / "engines", watch_memory=False,
                      placement=CpuTurn(DeviceLedger.turn(tmp_path / "engine-turn.json")))
    tp1 = handle(pool, label="s1", name="m", env={VISIBLE_ENV: "0"}).engine
    tp2 = handle(pool, {TP_ARG: 2}, label="s2", name="m", env={VISIBLE_ENV: "0", BIND_ENV: "0|1"}).engine
    assert tp1.env == {VISIBLE_ENV: "0"}
    assert tp2.env[SHUTDOWN_GRACE_ENV] == "20" and tp2.env[BIND_ENV] == "0|1"
    pool.close_all()


def test_slots_share_out_the_cores():
    assert [slot_cores([s], 2, [0, 1]) for s in (0, 1)] == [[0], [1]]
    assert [slot_cores([s], 2, [0, 1, 2, 3, 4]) for s in (0, 1)] == [[0, 1], [2, 3]]
    assert [slot_cores([s], 3, [4, 5]) for s in (0, 1, 2)] == [[4], [5], [4]]  # more slots than cores
    assert slot_cores([0, 1], 2, [0, 1]) == [0, 1]


def _holds_a_slot(path: str, held, release) -> None:
    """Another worker: takes a slot of the turn, holds it until told."""
    ledger = DeviceLedger.turn(path, 2)
    lease = ledger.acquire(1, "other worker", wait_s=20)
    held.set()
    release.wait(20)
    ledger.release(lease)


@pytest.fixture
def two_slot_turn(tmp_path, monkeypatch):
    """A 2-slot engine turn on a 2-core machine, another worker (a process)
    holding one slot until `release` is set, and this worker's pool."""
    monkeypatch.setattr(pool_mod, "OfflineEngine", GpuStandIn)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    GpuStandIn.used = {0: [BASE]}
    path = tmp_path / "engine-turn.json"
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_holds_a_slot, args=(str(path), held, release))
    other.start()
    assert held.wait(20)
    pool = EnginePool(EngineInterpreter(tier="cpu"), tmp_path / "engines", watch_memory=False,
                      placement=CpuTurn(DeviceLedger.turn(path, 2)))
    yield pool, release
    release.set()
    other.join(20)
    pool.close_all()


def test_beside_another_worker_an_engine_computes_on_its_own_slots_core(two_slot_turn):
    """The other worker took slot 0 (core 0): this worker's engines get slot
    1 and are bound to core 1; a TP 2 engine keeps its ranks' placement
    over both cores, and a longer grace for its ranks to exit."""
    pool, _ = two_slot_turn
    tp1 = handle(pool, label="s1", name="m", env={VISIBLE_ENV: "0"}).engine
    tp2 = handle(pool, {TP_ARG: 2}, label="s2", name="m", env={VISIBLE_ENV: "0", BIND_ENV: "0|1"}).engine
    assert tp1.env[BIND_ENV] == "1" and tp2.env[BIND_ENV] == "0|1"
    assert SHUTDOWN_GRACE_ENV not in tp1.env and tp2.env[SHUTDOWN_GRACE_ENV] == "20"
    assert {d: h["pid"] == os.getpid() for d, h in pool.placement.ledger.state()["held"].items()} == {"0": False, "1": True}
    pool.release_since(0)
    assert set(pool.placement.ledger.state()["held"]) == {"0"}


def test_a_module_alone_waits_for_every_slot_and_keeps_the_machines_placement(two_slot_turn):
    """`alone` (the soak): the engine starts only once the other worker gave
    its slot back, holds both, and is placed as in a run of one worker
    (no binding of its own)."""
    pool, release = two_slot_turn
    pool.placement.alone = True
    started = []
    thread = threading.Thread(target=lambda: started.append(handle(pool, label="soak", name="m",
                                                                   env={VISIBLE_ENV: "0"}).engine))
    thread.start()
    thread.join(1.0)
    assert not started  # the other worker's engines compute: the soak waits
    release.set()
    thread.join(20)
    [engine] = started
    assert BIND_ENV not in engine.env and set(pool.placement.ledger.state()["held"]) == {"0", "1"}


def _waits_for_both(path: str, log: str) -> None:
    """A worker (a later process: a higher pid) waiting for every slot."""
    ledger = DeviceLedger.turn(path, 2)
    lease = ledger.acquire(2, "alone", wait_s=20)
    Path(log).write_text(f"{time.monotonic()} ")
    time.sleep(0.5)
    with open(log, "a") as f:
        f.write(f"{time.monotonic()}")
    ledger.release(lease)


def test_a_worker_waiting_for_every_slot_is_not_overtaken(tmp_path):
    """Slot 1 is free while a worker waits for both: this worker (a lower
    pid), coming later for one slot, waits until that one had both."""
    path, log = tmp_path / "engine-turn.json", tmp_path / "alone.txt"
    ctx = multiprocessing.get_context("fork")
    held, release = ctx.Event(), ctx.Event()
    busy = ctx.Process(target=_holds_a_slot, args=(str(path), held, release))
    busy.start()
    assert held.wait(20)
    alone = ctx.Process(target=_waits_for_both, args=(str(path), str(log)))
    alone.start()
    ledger = DeviceLedger.turn(path, 2)
    while str(alone.pid) not in ledger.state().get("waiting", {}):
        time.sleep(0.01)
    threading.Timer(0.3, release.set).start()
    ledger.acquire(1, "late", wait_s=20)
    got = time.monotonic()
    alone.join(20)
    busy.join(20)
    began, ended = map(float, log.read_text().split())
    assert ended <= got, (began, ended, got)


# --- the runner: what a scenario sees -----------------------------------------------

class StubPool:
    """Hands out stand-in engines, or raises what it was told to."""

    def __init__(self):
        self.raises, self.calls = None, []
        self.interpreter = SimpleNamespace(identity={"version": "0.32.0"}, python="/x/bin/python")

    def spec(self, kind, model, args=None, env=None, name="engine"):
        return EngineSpec(kind, model, self.interpreter.python, dict(args or {}), dict(env or {}), name)

    def get(self, spec, **kw):
        self.calls.append({**kw, "name": spec.name, "env": spec.env})
        if self.raises:
            raise self.raises
        engine = SimpleNamespace(chat=lambda convs, sampling, adapters=None: ["answer"] * len(convs),
                                 mark=lambda: None, observations=None, kind="stub", identity={},
                                 control=SimpleNamespace(steering=lambda **steer: contextlib.nullcontext()))
        return EngineHandle(engine)


@pytest.fixture
def runner_on_stub():
    from harness.models import ModelEntry
    from harness.runner import Runner

    entry = ModelEntry("gpu", "m", "org/m", frozenset({"text"}), {})
    pool = StubPool()
    return Runner(entry, "org/m", "family", pool, on_engine=lambda e: None), pool


def _batch(runner, **kw):
    from harness.engines.base import Sampling
    from harness.workloads.request import Request, Workload

    return runner.batch(Workload("w", (Request("q", [{"role": "user", "content": "hi"}]),)),
                        Sampling(max_tokens=1), **kw)


def test_a_scenario_short_of_gpus_skips_and_one_with_none_left_fails_on_the_leak(runner_on_stub):
    runner, pool = runner_on_stub
    pool.raises = NotHostable("family[m-w] needs 2 GPU(s); this run has 2, 1 taken out (gpu1 ...)")
    with pytest.raises(pytest.skip.Exception, match="1 taken out"):
        _batch(runner)
    pool.raises = NoDeviceLeft("no GPU left in this run: gpu0 taken out: memory not back after engine x")
    run = _batch(runner, engine_args={"max_num_seqs": 2})
    with pytest.raises(Exception) as failure:
        run.outcomes
    assert failure.value.cause == Cause.LEAK and "no GPU left" in str(failure.value)


def test_an_engine_given_up_to_make_room_is_opened_again(runner_on_stub):
    runner, pool = runner_on_stub
    run = _batch(runner)
    first = run.engine
    assert _batch(runner).engine is first and len(pool.calls) == 1  # the scenario's engine, reused
    run.use.handle.evicted = True  # what the pool says when it retires it to make room
    assert _batch(runner).engine is not first and len(pool.calls) == 2


def test_engines_with_the_cards_arguments_run_on_the_cards_gpu(runner_on_stub):
    runner, pool = runner_on_stub
    lease = Lease((3,), "card l4-22g for m")
    runner.on_card({"gpu_memory_utilization": 0.27}, lease)
    _batch(runner, engine_args={"gpu_memory_utilization": 0.27})
    _batch(runner)
    assert [c["lease"] for c in pool.calls] == [lease, None]
    with pytest.raises(pytest.skip.Exception, match="an emulated card is one"):
        _batch(runner, engine_args={"gpu_memory_utilization": 0.27, "tensor_parallel_size": 2})


def test_each_workers_engine_logs_carry_its_id(tmp_path, monkeypatch):
    """Two xdist workers share the run's engines folder: their first engines
    must not share a log, nor a teardown record's id."""
    monkeypatch.setattr(pool_mod, "OfflineEngine", GpuStandIn)
    GpuStandIn.used = {0: [BASE]}
    logs = []
    for worker in ("gw0-", "gw1-"):
        pool = EnginePool(EngineInterpreter(tier="cpu"), tmp_path / "engines", watch_memory=False,
                          log_prefix=worker)
        logs.append(handle(pool, label="s", name="m", env={VISIBLE_ENV: "0"}).engine.log_path.name)
        pool.close_all()
    assert logs == ["gw0-01-offline-m.log", "gw1-01-offline-m.log"]
