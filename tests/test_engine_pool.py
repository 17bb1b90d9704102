"""The engine pool: one start per configuration, a crashed engine replaced
for the next scenario with the crash kept against the one that saw it, each
seen through the engine's handle."""
import os
import signal

import pytest

from harness.engines.base import Sampling
from harness.engines.faults import engine_core_pid
from harness.engines.outcomes import Completion, EngineCrashed
from harness.engines.pool import EnginePool
from harness.workloads.chat import user

pytestmark = pytest.mark.engine


def test_shared_start_then_replacement_after_a_crash(tiny_gemma4, interpreter, tmp_path):
    model, args = tiny_gemma4
    pool = EnginePool(interpreter, tmp_path)
    try:
        spec = pool.spec("offline", str(model), args)
        handle = pool.get(spec, label="s1")
        first = handle.engine
        assert pool.get(spec, label="s2") is handle
        os.kill(engine_core_pid(first), signal.SIGKILL)
        [r] = first.chat([user("hi")], Sampling(max_tokens=4))
        assert isinstance(r, EngineCrashed)
        handle.record_crash("s2")

        second = pool.get(spec, label="s3")
        assert second is not handle and second.engine is not first
        assert isinstance(second.engine.chat([user("hi")], Sampling(max_tokens=4))[0], Completion)
        retired = pool.retired[0]
        assert retired is handle and retired.crashed_in == "s2"
        assert retired.served == ["s1", "s2"]
        assert pool.handles[next(iter(pool.handles))].served == ["s3"]
        assert len(list(tmp_path.glob("*.log"))) == 2  # one log per engine start
    finally:
        assert all(not left for left in pool.close_all().values())
