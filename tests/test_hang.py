"""Hangs, from progress rather than health, on the real engine with a
fault switched on inside it: the verdict comes within twice the stall
bound, carries every engine process's stacks and the last steps, and the
hung engine is stopped like a crashed one, with nothing of it left.

The server's hang (a scheduler that stops admitting while /health answers)
is judged where it matters, ending a soak: tests/test_scenario_soak.py."""
from __future__ import annotations

import time

import pytest

from harness.verdicts import Cause
from harness.engines.base import Sampling
from harness.engines.faults import fault_env
from harness.engines.outcomes import Completion
from harness.engines.pool import EnginePool
from harness.engines.procs import group_members
from harness.workloads.chat import user

pytestmark = pytest.mark.engine

STALL_S = 5.0
SHORT = Sampling(max_tokens=4)


def _engine_left(pgid: int) -> list[int]:
    return [p.pid for p in group_members(pgid)]


def _hung(fault: str, model, args, interpreter, tmp_path, second: list):
    """One request answered, then `second` sent: (its results, seconds to
    the verdict, the engine's process group). The bound is set after the
    first request: a fresh engine's first step compiles kernels (seen in
    its stacks here), longer than this test's short bound."""
    pool = EnginePool(interpreter, tmp_path, watch_memory=False)
    try:
        handle = pool.get(pool.spec("offline", str(model), args, env=fault_env(fault)), label="hang")
        engine, pgid = handle.engine, handle.engine.proc.pid
        assert isinstance(engine.chat([user("first")], SHORT)[0], Completion)
        engine.stall_s = STALL_S
        began = time.monotonic()
        results = engine.chat(second, SHORT)
        took = time.monotonic() - began
        closing = time.monotonic()
    finally:
        left = pool.close_all()
    assert all(not pids for pids in left.values()), left
    print(f"offline: verdict after {took:.1f} s, stopped {time.monotonic() - closing:.1f} s later")
    return results, took, pgid


def test_an_offline_request_never_scheduled_is_hung_while_the_others_move(tiny_gemma4, interpreter, tmp_path):
    model, args = tiny_gemma4
    results, took, pgid = _hung("spin-request", model, args, interpreter, tmp_path,
                                [user("second, set aside"), user("third, answered")])
    crash = results[0]
    assert all(r is crash for r in results) and crash.cause == Cause.HANG, results
    assert STALL_S <= took <= 2 * STALL_S, took
    stall = crash.stall
    assert not stall["scheduled"], stall
    moved = {rid for step in stall["last_steps"] for rid in step["tokens"]}
    assert moved and stall["request"] not in moved, stall  # the other request was served meanwhile
    core = [p["stacks"] for p in crash.stacks.values() if "EngineCore" in p["process"]]
    assert core and "in _process_engine_step" in core[0], crash.stacks  # caught stepping, with nothing to run
    assert _engine_left(pgid) == []
