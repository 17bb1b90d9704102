"""The pool's reuse rules and release, with stand-in engines (no engine start)."""
from types import SimpleNamespace

import pytest

from harness.engines.pool import EnginePool, PoolEntry


class StandInEngine:
    kind, log_path, crashed, ready = "offline", None, None, True

    def __init__(self, name):
        self.name, self.closed = name, False
        self.proc = SimpleNamespace(death=lambda: None)

    def close(self, grace=10.0):
        self.closed = True
        return []


@pytest.fixture
def pool(tmp_path, monkeypatch):
    pool = EnginePool(SimpleNamespace(python="/x/bin/python", tier="cpu"), tmp_path, watch_memory=False)
    started = []

    def start(kind, model, engine_args, name, env, *scenario_and_devices):
        started.append(StandInEngine(name))
        return PoolEntry(started[-1])
    monkeypatch.setattr(pool, "_start", start)
    pool.started = started
    return pool


def test_same_configuration_is_shared(pool):
    assert pool.get("offline", "m", {}, scenario="a") is pool.get("offline", "m", {}, scenario="b")
    assert len(pool.started) == 1


def test_an_engine_whose_process_died_is_replaced_not_reused(pool):
    first = pool.get("offline", "m", {}, scenario="a")
    first.proc = SimpleNamespace(death=lambda: (-9, "engine process"))
    second = pool.get("offline", "m", {}, scenario="b")
    assert second is not first and first.closed
    assert [e.engine for e in pool.retired] == [first]


def test_another_environment_is_another_engine(pool):
    plain = pool.get("offline", "m", {}, scenario="a", env={})
    other = pool.get("offline", "m", {}, scenario="b", env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"})
    assert other is not plain
    assert pool.get("offline", "m", {}, scenario="c", env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"}) is other


def test_release_retires_only_what_was_handed_out_since_the_mark(pool):
    earlier = pool.get("offline", "earlier", {}, scenario="module1")
    mark = pool.mark()
    mine = pool.get("offline", "mine", {}, scenario="module2")
    released = pool.release_since(mark)
    assert [e.engine for e in released] == [mine] and mine.closed
    assert not earlier.closed and list(pool.entries.values())[0].engine is earlier
    # Handed out again after the mark: released with the module that used it last.
    mark = pool.mark()
    assert pool.get("offline", "earlier", {}, scenario="module3") is earlier
    assert [e.engine for e in pool.release_since(mark)] == [earlier]
    assert pool.entries == {}
    assert pool.get("offline", "mine", {}, scenario="module4") is not mine  # a fresh start


def test_release_by_name_leaves_the_other_models_engines(pool):
    mark = pool.mark()
    g4 = pool.get("offline", "m4", {}, scenario="s[g4]", name="tiny-gemma4")
    g3n = pool.get("offline", "m3n", {}, scenario="s[g3n]", name="tiny-gemma3n")
    assert [e.engine for e in pool.release_since(mark, name="tiny-gemma4")] == [g4]
    assert not g3n.closed and [e.engine for e in pool.entries.values()] == [g3n]
