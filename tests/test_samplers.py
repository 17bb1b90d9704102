"""Samplers: a real child process whose RSS grows and shrinks by known
amounts, the process tree, timeline/peak/window arithmetic, NVML's absence
on this machine, and the leak check.

Tests marked FAKE NVML feed a stand-in pynvml module to exercise only the
arithmetic and PID-attribution logic; they say nothing about a real driver
(tests/gpu/ does that on a GPU machine)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from array import array
from pathlib import Path

import psutil
import pytest

from harness.verdicts import Cause
from harness.memory.nvml import Nvml, nvml_unavailable_reason
from harness.memory.samplers import (ENGINE_RSS, HostSampler, NvmlSampler, Sampler, SamplerResult, SamplerUnavailable,
                                     engine_series, used_series)
from harness.memory.samplers.base import _Series
from harness.memory.samplers.leak import (LeakVerdict, Recovery, check_gpu_teardown, check_host_teardown, excess_held,
                                          wait_for_recovery)
from harness.memory.samplers.nvml import MATCHED, NO_FIGURE, NONE_LISTED, NOT_ON_DEVICE, PID_MISMATCH, attribute
from harness.memory.samplers.shm import SHM_DIR, existing_segments

MB = 1_000_000

# A child that allocates and frees on command. `hold` allocates, keeps the
# memory for the given seconds and frees it before answering, so only the
# background thread can see it.
CHILD = textwrap.dedent("""
    import subprocess, sys, time
    blocks, kids = [], []
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "alloc":
            blocks.append(b"\\1" * int(arg[0]))  # bytes * n writes every page
        elif cmd == "free":
            blocks.clear()
        elif cmd == "hold":
            block = b"\\1" * int(arg[0]); time.sleep(float(arg[1])); del block
        elif cmd == "spawn":  # a grandchild holding memory until stdin closes, then lingering
            kids.append(subprocess.Popen([sys.executable, "-c",
                "import sys, time; b = b'\\\\1' * %s; print('up', flush=True); sys.stdin.read(); "
                "time.sleep(%s)" % (arg[0], arg[1] if len(arg) > 1 else 0)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            kids[-1].stdout.readline()
        elif cmd == "reap":
            for k in kids: k.stdin.close(); k.wait()
        elif cmd == "shm":  # a /dev/shm segment, written so its pages are allocated
            from multiprocessing import resource_tracker, shared_memory
            seg = shared_memory.SharedMemory(create=True, size=int(arg[0]))
            resource_tracker.unregister(seg._name, "shared_memory")  # ours to leak
            seg.buf[:] = b"\\1" * int(arg[0]); blocks.append(seg); print(seg.name, flush=True)
        elif cmd == "unshm":
            for seg in [b for b in blocks if hasattr(b, "unlink")]: seg.close(); seg.unlink()
        elif cmd == "exit":
            break
        print("done", flush=True)
""")


class Child:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def do(self, *cmd) -> None:
        self.proc.stdin.write(" ".join(map(str, cmd)) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "done"

    def shm(self, size: int) -> str:
        """Create a shared-memory segment in the child; its /dev/shm name."""
        self.proc.stdin.write(f"shm {size}\n")
        self.proc.stdin.flush()
        name = self.proc.stdout.readline().strip().lstrip("/")
        assert self.proc.stdout.readline().strip() == "done"
        return name

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("exit\n")
            self.proc.stdin.flush()
            self.proc.wait(10)


@pytest.fixture
def child():
    c = Child()
    yield c
    c.close()


# -- host sampler on a real process ------------------------------------------

def test_host_sampler_sees_rss_grow_and_shrink_by_known_amounts(child):
    sampler = HostSampler(child.pid, rate_hz=100).start()
    t_base = sampler.mark("base")
    child.do("alloc", 200 * MB)
    t_held = sampler.mark("held")
    child.do("free")
    t_freed = sampler.mark("freed")
    result = sampler.stop()

    at = {label: result.window(t, t).peak[ENGINE_RSS] for t, label in result.marks}
    assert at["held"] - at["base"] == pytest.approx(200 * MB, rel=0.05)
    assert at["freed"] - at["base"] < 20 * MB
    assert result.window(t_base, t_freed).peak[ENGINE_RSS] == max(at.values())
    assert t_base < t_held < t_freed


def test_host_sampler_catches_a_peak_nobody_marked(child):
    # The child allocates 200 MB, holds it 0.2 s and frees it before it
    # answers: only the background thread can have seen it.
    sampler = HostSampler(child.pid, rate_hz=100).start()
    t0 = sampler.mark("before")
    child.do("hold", 200 * MB, 0.2)
    t1 = sampler.mark("after")
    result = sampler.stop()
    before, after = (result.window(t, t).peak[ENGINE_RSS] for t in (t0, t1))
    assert after - before < 20 * MB, "premise: the memory was freed before the end mark"
    assert result.window(t0, t1).peak[ENGINE_RSS] - before == pytest.approx(200 * MB, rel=0.05)


def test_host_sampler_follows_the_process_tree(child):
    sampler = HostSampler(child.pid, refresh_interval_s=0).start()  # re-walk every tick
    base = sampler.window(*[sampler.mark("base")] * 2).peak[ENGINE_RSS]
    child.do("spawn", 100 * MB)
    grown = sampler.window(*[sampler.mark("grandchild up")] * 2).peak[ENGINE_RSS]
    child.do("reap")
    result = sampler.stop()
    assert grown - base >= 100 * MB
    assert len({p.pid for p in sampler.pids_seen}) == 2
    assert {p["pid"] for p in result.meta["pids_seen"]} == {p.pid for p in sampler.pids_seen}


def test_host_sampler_refuses_a_missing_process():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(ValueError, match=str(proc.pid)):
        HostSampler(proc.pid)


# -- timeline, peak, windows ----------------------------------------------------

class SettableSampler(Sampler):
    """Reads whatever the test last set; the thread's own ticks repeat it."""
    name = "settable"

    def __init__(self):
        super().__init__(rate_hz=200)
        self.reading: dict[str, int] = {}

    def _read(self):
        return dict(self.reading)


def test_windows_between_marks_hold_their_own_peaks():
    s = SettableSampler()
    s.reading = {"a": 10}
    s.start()
    s.mark("begin x")
    s.reading = {"a": 50, "b": 7}
    s.mark("end x")
    s.reading = {"a": 20}
    s.mark("begin y")
    s.reading = {"a": 5}
    s.mark("end y")
    result = s.stop()

    assert result.peak == {"a": 50, "b": 7}
    assert result.between("begin x", "end x").peak == {"a": 50, "b": 7}
    # y's window starts after the 50 and the "b" readings ended
    assert result.between("begin y", "end y").peak == {"a": 20}
    assert result.last() == {"a": 5}  # the final sample, not stale keys
    with pytest.raises(KeyError, match="nope"):
        result.between("nope", "end y")


def test_missing_key_is_absent_not_zero():
    series = _Series()
    series.append(0.0, {"x": 5})
    series.append(0.1, {})
    series.append(0.2, {"x": 3, "y": 9})
    r = SamplerResult("t", 100, 0.0, 0.2, 0.0, 0.0, 3, _series=series)
    assert r.timeline == [(0.0, {"x": 5}), (0.1, {}), (0.2, {"x": 3, "y": 9})]
    assert r.window(0.0, 0.1).peak == {"x": 5}  # y never seen there
    assert r.to_dict()["timeline"]["series"]["y"] == [None, None, 9]


def test_timeline_goes_on_a_record_and_survives_the_reports_thinning(tmp_path):
    from harness.memory.timeline import downsample  # the one thinning, the report's too
    series = _Series()
    series.append(10.0, {"gpu0-used": 5})
    series.append(10.5, {"gpu0-used": 9, "gpu0-engine": 4})
    r = SamplerResult("t", 100, 10.0, 10.5, 0.0, 0.0, 2, _series=series)
    timeline = r.to_dict()["timeline"]  # a record's memory_timeline
    assert timeline == {"t": [0.0, 0.5], "series": {"gpu0-used": [5, 9], "gpu0-engine": [None, 4]}}
    assert downsample(timeline, 1) == {"t": [0.0], "series": {"gpu0-used": [9], "gpu0-engine": [4]}}
    r.write_csv(tmp_path / "timeline.csv")  # the full-resolution file, for people
    assert (tmp_path / "timeline.csv").read_text().splitlines() == [
        "t,gpu0-engine,gpu0-used", "0.0000,,5", "0.5000,4,9"]


def test_achieved_rate_and_cpu_fraction_are_per_second_of_run():
    r = SamplerResult("t", 100, started=10.0, stopped=12.0, started_unix=0.0, cpu_seconds=0.02,
                      ticks=150)
    assert r.achieved_hz == 75
    assert r.cpu_fraction == pytest.approx(0.01)


def test_to_dict_is_json_and_thinning_keeps_the_peak():
    series = _Series()
    series.times = array("d", (i / 100 for i in range(10_000)))
    values = array("q", [100]) * 10_000
    values[4321] = 999  # a single-sample spike
    series.values = {"rss": values}
    r = SamplerResult("t", 100, 0.0, 100.0, 1.7e9, 0.5, 10_000, marks=[(5.0, "m")], _series=series)
    d = json.loads(json.dumps(r.to_dict(max_points=100)))
    assert len(d["timeline"]["t"]) <= 100
    assert max(d["timeline"]["series"]["rss"]) == 999
    assert d["peak"] == {"rss": 999}
    assert d["marks"] == [{"t": 5.0, "label": "m"}]


def test_a_failing_backend_surfaces_at_stop():
    class Broken(SettableSampler):
        def _read(self):
            if self._ticks >= 3:
                raise OSError("device vanished")
            return {"a": 1}

    s = Broken().start()
    s._thread.join(5)  # the thread ends on the error
    with pytest.raises(RuntimeError) as info:
        s.stop()
    assert isinstance(info.value.__cause__, OSError)


def test_a_slow_refresh_never_delays_a_tick():
    class SlowRefresh(SettableSampler):
        def _refresh(self):
            if self.running:
                time.sleep(0.3)  # a tree walk stalled behind a busy engine

    s = SlowRefresh()
    s.refresh_interval_s = 0.05
    s.reading = {"a": 1}
    s.start()
    time.sleep(0.6)
    result = s.stop()
    # 200 Hz for 0.6 s; a tick that waited for each refresh would make about 3
    assert result.ticks >= 40, result.ticks


def test_a_tick_slower_than_the_period_leaves_the_harness_as_long_again():
    """A real-time sampler always behind its schedule would hold the GIL
    from the harness's own threads; it rests as long as each tick took,
    so its rate drops instead and another thread keeps half the time."""
    class SlowTick(SettableSampler):
        def _read(self):
            ends = time.thread_time() + 0.01  # 10 ms of this thread's CPU, holding the GIL
            while time.thread_time() < ends:
                pass
            return dict(self.reading)

    s = SlowTick()  # 200 Hz: 5 ms a period, less than a tick
    s.reading = {"a": 1}
    s.start()
    time.sleep(0.6)
    result = s.stop()
    # Back to back it makes about 60; resting as long, about 30.
    assert result.ticks <= 0.6 / 0.02 + 4, result.ticks


def _policy(tid: int) -> int:
    """The scheduling policy of one thread of this process (0: normal, 1: FIFO)."""
    return int(Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[38])


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_the_sampler_threads_ask_for_priority_and_the_caller_keeps_its_own():
    s = SettableSampler().start()
    time.sleep(0.1)  # the threads set their own priority as they begin
    policy = _policy(s._thread.native_id)
    result = s.stop()
    got = result.meta["priority"]
    assert result.meta["refresh_priority"] == got
    assert got in ("SCHED_FIFO 1", "nice -10") or got.startswith("normal (refused"), got
    assert policy == (1 if got.startswith("SCHED_FIFO") else 0)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's own thread is untouched
    plain = SettableSampler()
    plain.raise_priority = False
    plain.start()
    assert plain.stop().meta["priority"] == "normal"


def test_rate_must_be_positive():
    with pytest.raises(ValueError):
        Sampler(rate_hz=0)


# -- NVML: the real backend on this machine --------------------------------------

def test_nvml_unavailable_is_a_reason_not_a_crash():
    reason = nvml_unavailable_reason()
    if reason is None:
        pytest.skip("NVML works here; tests/gpu covers the real backend")
    assert reason.startswith("NVML unavailable")
    with pytest.raises(SamplerUnavailable) as info:
        NvmlSampler(rate_hz=100).start()
    assert str(info.value) == reason


# -- FAKE NVML: arithmetic and PID attribution only --------------------------------

def test_fake_nvml_uses_v2_memory_info_and_falls_back_to_v1(fake_nvml):
    with Nvml(fake_nvml([5 << 30], {})) as nvml:
        m = nvml.memory(0)
    assert (m.version, m.used, m.reserved) == (2, 5 << 30, 300 << 20)
    module = fake_nvml([5 << 30], {}, has_v2=False)
    with Nvml(module) as nvml:
        assert [nvml.memory(0).version for _ in range(3)] == [1, 1, 1]
    assert module.calls == {"v2": 0, "v1": 3}  # v2 is not retried once it failed


def test_fake_nvml_attribution_rules():
    assert attribute({10, 11}, {10: 100, 11: 50, 99: 7}) == (150, MATCHED)  # 99: someone else
    assert attribute({10}, {}) == (None, NONE_LISTED)
    assert attribute({10}, {42: 7}, own_pids={42}) == (0, NOT_ON_DEVICE)
    assert attribute({10}, {4242: 7}) == (None, PID_MISMATCH)
    assert attribute({10}, {10: None}) == (None, NO_FIGURE)


def test_fake_nvml_sampler_reports_the_engine_share(child, fake_nvml):
    module = fake_nvml([1 << 30], {child.pid: 700 << 20, 31337: 1 << 20})
    result = NvmlSampler(child.pid, nvml_module=module).start().stop()
    assert result.peak == {used_series(0): 1 << 30, engine_series(0): 700 << 20}
    assert set(result.meta["attribution"]["gpu0"]) == {MATCHED}
    assert result.meta["memory_info_version"] == 2
    assert result.notes == []


def test_fake_nvml_pid_mismatch_is_recorded_not_reported_as_zero(child, fake_nvml):
    module = fake_nvml([1 << 30], {4_000_001: 700 << 20})  # a host-namespace pid
    result = NvmlSampler(child.pid, nvml_module=module).start().stop()
    assert engine_series(0) not in result.peak
    assert result.peak[used_series(0)] == 1 << 30
    assert set(result.meta["attribution"]["gpu0"]) == {PID_MISMATCH}
    assert any("PID namespace" in n and str(child.pid) in n for n in result.notes)


# -- leak arithmetic and the leak check ------------------------------------------

def test_excess_direction():
    assert excess_held(1000, 1300, higher_is_held=True) == 300   # device used rose
    assert excess_held(1000, 700, higher_is_held=False) == 300   # available fell


def test_wait_for_recovery_returns_once_within_margin():
    readings = iter([900, 600, 120, 100])
    r = wait_for_recovery("gpu0 used", lambda: next(readings), baseline=100, margin=50,
                          higher_is_held=True, timeout_s=10, poll_s=0)
    assert (r.final, r.excess, r.returned) == (120, 20, True)


def test_wait_for_recovery_gives_up_at_the_bound():
    r = wait_for_recovery("gpu0 used", lambda: 900, baseline=100, margin=50,
                          higher_is_held=True, timeout_s=0, poll_s=0)
    assert (r.excess, r.returned) == (800, False)


def test_leak_verdict_names_the_scenarios_and_figures():
    verdict = LeakVerdict("gpu", ["scen_a[gemma4]", "scen_b[gemma4]"],
                          [Recovery("gpu0 used memory", 100, 900 << 20, 800 << 20, 256 << 20, 30.0)])
    assert (verdict.ok, verdict.cause) == (False, Cause.LEAK)
    assert "scen_a[gemma4], scen_b[gemma4]" in verdict.message
    assert "gpu0 used memory: 800.0 MiB over baseline" in verdict.message
    assert verdict.evidence()["recoveries"][0]["excess"] == 800 << 20
    assert verdict.evidence()["uses"] == ["scen_a[gemma4]", "scen_b[gemma4]"]


def test_leak_verdict_within_margin_is_ok_with_no_cause():
    verdict = LeakVerdict("gpu", ["s"], [Recovery("gpu0 used memory", 100, 200, 100, 256 << 20, 0.5)])
    assert (verdict.ok, verdict.cause, verdict.message) == (True, None, "")
    assert verdict.evidence()["recoveries"][0]["final"] == 200


def _engine_like(child):
    """A sampler on `child` started after a /dev/shm baseline, as MemoryWatch does."""
    before = existing_segments()
    return before, HostSampler(child.pid, refresh_interval_s=0).start()


def test_host_teardown_passes_when_the_tree_and_its_segments_are_gone(child):
    before, sampler = _engine_like(child)
    child.do("spawn", 10 * MB)
    child.shm(4 * MB)
    sampler.mark("spawned")
    child.do("unshm")
    child.do("reap")
    sampler.stop()
    child.close()
    assert sampler.shm_seen - before  # the segment was seen while it lived
    verdict = check_host_teardown(sampler.pids_seen, sampler.shm_seen - before, uses=["s1"],
                                  timeout_s=10)
    assert (verdict.ok, verdict.cause, verdict.survivors) == (True, None, [])


def test_host_teardown_fails_on_a_segment_the_engine_left(child):
    before, sampler = _engine_like(child)
    name = child.shm(4 * MB)
    sampler.mark("created")
    sampler.stop()
    child.close()  # exits without unlinking: the segment outlives it
    try:
        verdict = check_host_teardown(sampler.pids_seen, sampler.shm_seen - before,
                                      uses=["s1"], timeout_s=0.5)
        assert (verdict.ok, verdict.cause) == (False, Cause.LEAK)
        assert "engine shared memory in /dev/shm: 3.8 MiB over baseline" in verdict.message
        assert f"held by {name}" in verdict.message
    finally:
        (SHM_DIR / name).unlink()


def test_host_teardown_ignores_what_other_jobs_hold(child):
    # Another job's segment and memory, alive through the teardown, are not
    # the engine's: the check passes whatever they do to available memory.
    other = Child()
    try:
        before, sampler = _engine_like(child)
        other_segment = other.shm(8 * MB)
        other.do("alloc", 300 * MB)
        sampler.mark("busy machine")
        sampler.stop()
        child.close()
        verdict = check_host_teardown(sampler.pids_seen, sampler.shm_seen - before, timeout_s=5)
        assert verdict.ok, verdict.message
        assert not any(other_segment in s for s in sampler.shm_seen)
    finally:
        other.do("unshm")
        other.close()


def test_host_teardown_fails_on_a_surviving_process(child):
    sampler = HostSampler(child.pid, refresh_interval_s=0).start()
    child.do("spawn", 10 * MB, 60)  # outlives its parent by a minute
    sampler.mark("spawned")
    sampler.stop()
    orphan = next(p for p in sampler.pids_seen if p.pid != child.pid)
    child.proc.kill()  # the root dies without reaping: its child is orphaned, alive
    child.proc.wait()
    try:
        verdict = check_host_teardown(sampler.pids_seen, set(), uses=["s1"], timeout_s=0.5)
        assert (verdict.ok, verdict.cause) == (False, Cause.LEAK)
        assert f"process {orphan.pid}" in verdict.message
        assert [p["pid"] for p in verdict.evidence()["survivors"]] == [orphan.pid]
    finally:
        psutil.Process(orphan.pid).kill()


def test_fake_nvml_gpu_teardown_leak_and_recovery(fake_nvml):
    with Nvml(fake_nvml([3 << 30, 2 << 30, 1 << 30], {})) as nvml:
        ok = check_gpu_teardown({0: 1 << 30}, uses=["s"], margin_bytes=0, timeout_s=10,
                                nvml=nvml)
    assert ok.ok and ok.recoveries[0].final == 1 << 30
    with Nvml(fake_nvml([3 << 30], {})) as nvml:
        leak = check_gpu_teardown({0: 1 << 30}, uses=["s"], margin_bytes=256 << 20, timeout_s=0,
                                  nvml=nvml)
    assert (leak.ok, leak.cause) == (False, Cause.LEAK)
    assert leak.evidence()["recoveries"][0]["excess"] == 2 << 30
