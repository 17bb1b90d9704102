"""Engines started ahead (EnginePool.start_ahead), with stand-in engines
whose start waits on the test: taken over by `get`, a failure raised in the
use that needed it, dropped when unused, stopped on an interrupt."""
import threading
from types import SimpleNamespace

import pytest

from harness.engines import pool as pool_module
from harness.engines.causes import Cause
from harness.engines.outcomes import EngineCrashed, EngineStartupFailed
from harness.engines.pool import EnginePool

WAIT_S = 10.0


class GatedEngine:
    """Its start waits until the test opens `gate` (or it is closed); a
    model named "broken" fails to start."""
    gate = threading.Event()
    made: list["GatedEngine"] = []
    kind, crashed, ready = "offline", None, False

    def __init__(self, model, args, interpreter, log, *, name, env, start_timeout, request_timeout):
        self.model, self.name, self.log_path = model, name, log
        self.closed = threading.Event()
        self.started_in = None
        self.proc = SimpleNamespace(death=lambda: (-9, "engine process") if self.closed.is_set() else None)
        GatedEngine.made.append(self)

    def start(self):
        self.started_in = threading.current_thread().name
        while not (self.gate.is_set() or self.closed.is_set()):
            self.gate.wait(0.01)
        if self.closed.is_set() or self.model == "broken":
            raise EngineStartupFailed(EngineCrashed(Cause.STARTUP_FAILED, detail=f"{self.model} did not start"))
        self.ready = True
        return self

    def close(self, grace=10.0):
        self.closed.set()
        return []

    def settle(self):
        pass


@pytest.fixture
def pool(tmp_path, monkeypatch):
    GatedEngine.gate = threading.Event()
    GatedEngine.made = []
    monkeypatch.setattr(pool_module, "OfflineEngine", GatedEngine)
    return EnginePool(SimpleNamespace(python="/x/bin/python", tier="cpu"), tmp_path, watch_memory=False)


def spec(pool, model="m"):
    return pool.spec("offline", model, name="tiny")


def test_get_takes_over_the_engine_started_ahead(pool):
    assert pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    assert not pool.start_ahead(spec(pool), label="s[tiny-ahead]")  # on its way already
    threading.Timer(0.2, GatedEngine.gate.set).start()
    handle = pool.get(spec(pool), label="s[tiny]")  # waits for the start to end
    assert GatedEngine.made == [handle.engine] and handle.engine.ready
    assert handle.engine.started_in.startswith("start-ahead-")
    assert pool.get(spec(pool), label="s[tiny]-again") is handle
    assert not pool.start_ahead(spec(pool), label="s[tiny-ahead]")  # up already


def test_a_failed_start_ahead_is_raised_in_the_use_that_needs_it(pool):
    pool.start_ahead(spec(pool, "broken"), label="s[tiny-ahead]")
    GatedEngine.gate.set()
    with pytest.raises(EngineStartupFailed, match="broken did not start"):
        pool.get(spec(pool, "broken"), label="s[tiny]")


def test_one_that_died_before_it_was_asked_for_is_replaced(pool):
    pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    GatedEngine.gate.set()
    while not GatedEngine.made or not GatedEngine.made[0].ready:
        threading.Event().wait(0.01)
    GatedEngine.made[0].close()  # its process died, nobody asking it anything
    handle = pool.get(spec(pool), label="s[tiny]")
    assert handle.engine is GatedEngine.made[1] and handle.engine.started_in == threading.current_thread().name
    assert [h.engine for h in pool.retired] == [GatedEngine.made[0]]


def test_an_engine_nobody_asked_for_is_dropped(pool):
    pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    GatedEngine.gate.set()
    pool.drop_ahead()
    assert GatedEngine.made[0].closed.is_set() and pool.handles == {}
    assert [h.engine for h in pool.retired] == GatedEngine.made
    assert pool.close_all() == {str(GatedEngine.made[0].log_path): []}


def test_an_interrupt_stops_an_engine_still_starting(pool):
    pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    while not GatedEngine.made:
        threading.Event().wait(0.01)
    pool.interrupted(grace=0.2)  # the gate never opens: only the interrupt ends its start
    assert GatedEngine.made[0].closed.wait(WAIT_S)
    assert not pool.start_ahead(spec(pool, "other"), label="s[tiny-ahead]")


def test_nothing_starts_ahead_on_the_gpu_tier(tmp_path):
    pool = EnginePool(SimpleNamespace(python="/x/bin/python", tier="gpu"), tmp_path, watch_memory=False)
    assert not pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    assert pool._ahead == {}


def test_wait_ahead_returns_once_every_start_has_ended(pool):
    pool.start_ahead(spec(pool), label="s[tiny-ahead]")
    pool.start_ahead(spec(pool, "broken"), label="s[tiny-ahead]")
    threading.Timer(0.2, GatedEngine.gate.set).start()
    pool.wait_ahead()  # the failure is not raised here, but by the get that takes it over
    assert sorted(e.model for e in GatedEngine.made) == ["broken", "m"] and GatedEngine.made[0].started_in
    assert all(e.ready or e.model == "broken" for e in GatedEngine.made)
    with pytest.raises(EngineStartupFailed):
        pool.get(spec(pool, "broken"), label="s[tiny]")
