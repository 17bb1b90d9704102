"""The pool's reuse rules and release, with stand-in engines (no engine start)."""
from types import SimpleNamespace

import pytest

from harness.engines.pool import EnginePool, EngineHandle


class StandInEngine:
    kind, log_path, crashed, ready = "offline", None, None, True

    def __init__(self, name):
        self.name, self.closed = name, False
        self.proc = SimpleNamespace(death=lambda: None)

    def close(self, grace=10.0):
        self.closed = True
        return []

    def settle(self):
        pass


@pytest.fixture
def pool(tmp_path, monkeypatch):
    pool = EnginePool(SimpleNamespace(python="/x/bin/python", tier="cpu"), tmp_path, watch_memory=False)
    started = []

    def start(spec, *label_and_devices):
        started.append(StandInEngine(spec.name))
        return EngineHandle(started[-1])
    monkeypatch.setattr(pool, "_start", start)
    pool.started = started
    return pool


def get(pool, model, args=None, *, label, env=None, name="engine"):
    """The engine of an offline spec's handle."""
    return pool.get(pool.spec("offline", model, args, env, name), label=label).engine


def test_same_configuration_is_shared(pool):
    assert get(pool, "m", label="a") is get(pool, "m", label="b")
    assert len(pool.started) == 1


def test_an_engine_whose_process_died_is_replaced_not_reused(pool):
    first = get(pool, "m", label="a")
    first.proc = SimpleNamespace(death=lambda: (-9, "engine process"))
    second = get(pool, "m", label="b")
    assert second is not first and first.closed
    assert [e.engine for e in pool.retired] == [first]


def test_another_environment_is_another_engine(pool):
    plain = get(pool, "m", label="a", env={})
    other = get(pool, "m", label="b", env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"})
    assert other is not plain
    assert get(pool, "m", label="c", env={"VLLM_CPU_OMP_THREADS_BIND": "0|1"}) is other


def test_release_retires_only_what_was_handed_out_since_the_mark(pool):
    earlier = get(pool, "earlier", label="module1")
    mark = pool.mark()
    mine = get(pool, "mine", label="module2")
    released = pool.release_since(mark)
    assert [e.engine for e in released] == [mine] and mine.closed
    assert not earlier.closed and list(pool.handles.values())[0].engine is earlier
    # Handed out again after the mark: released with the module that used it last.
    mark = pool.mark()
    assert get(pool, "earlier", label="module3") is earlier
    assert [e.engine for e in pool.release_since(mark)] == [earlier]
    assert pool.handles == {}
    assert get(pool, "mine", label="module4") is not mine  # a fresh start


def test_release_by_name_leaves_the_other_models_engines(pool):
    mark = pool.mark()
    g4 = get(pool, "m4", label="s[g4]", name="tiny-gemma4")
    g3n = get(pool, "m3n", label="s[g3n]", name="tiny-gemma3n")
    assert [e.engine for e in pool.release_since(mark, name="tiny-gemma4")] == [g4]
    assert not g3n.closed and [e.engine for e in pool.handles.values()] == [g3n]


def test_a_failed_checks_engines_are_retired_and_their_users_get_new_ones(pool):
    """Before a rerun: the engines its runs used are retired, and their
    handles say so; the others stay, and the next `get` of the same spec
    starts a new engine."""
    spec = pool.spec("offline", "m")
    under_test = pool.get(spec, label="batch")
    reference = pool.get(pool.spec("offline", "m", {"enable_prefix_caching": False}), label="references")
    other = pool.get(pool.spec("server", "m"), label="load")
    assert pool.retire([under_test, reference]) == [under_test, reference]
    assert under_test.engine.closed and reference.engine.closed and under_test.evicted and reference.evicted
    assert not other.evicted and not other.engine.closed
    assert pool.get(spec, label="batch again").engine is not under_test.engine
    assert len(pool.started) == 4
    assert under_test.spec == spec  # what a rerun starts ahead


def test_engines_released_at_a_modules_end_say_so_to_a_rerun_of_its_last_check(pool):
    """The module's last check failed: its engines were released after its
    teardown, before the rerun. Their users must not come back to them."""
    mark = pool.mark()
    handle = pool.get(pool.spec("offline", "m"), label="batch")
    assert pool.release_since(mark) == [handle] and handle.evicted
    assert pool.retire([handle]) == [] and len(pool.retired) == 1  # retired once


def test_a_release_keeps_the_engines_a_later_check_needs(pool):
    """At a TP size's or a cache cell's end, the engines that a later group
    of the module declares it uses stay up; the others are retired."""
    mark = pool.mark()
    kept = pool.get(pool.spec("offline", "m", {"ref": 1}, name="m"), label="a")
    gone = pool.get(pool.spec("offline", "m", {"tp": 2}, name="m"), label="b")
    assert pool.release_since(mark, name="m", keep={kept.spec.key}) == [gone]
    assert gone.evicted and gone.engine.closed and not kept.evicted and not kept.engine.closed
    assert pool.get(pool.spec("offline", "m", {"ref": 1}, name="m"), label="c") is kept
