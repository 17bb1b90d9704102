"""GPU check of the encoder-transient measurement and its budget check: the
tiny Gemma4 on a CUDA vLLM, steered through the in-engine control file.

    MMHARNESS_GPU_ENGINE_PYTHON=/path/to/cuda-venv/bin/python \
        .venv/bin/python -m pytest tests/gpu -v

Each vision-tower pass is measured by the CUDA allocator's peak. With the
engine's own chunks on a real card's free memory, every pass stays within
the budget the engine stated; with every item forced into one pass against
a free figure of 4 MiB, the check fails with over-budget: the mutation that
shows test_encoder_transient_within_stated_budget failing. About 2 minutes.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.verdicts import CheckFailure
from harness.engines.base import Sampling
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.memory.card import chunks
from harness.models import models_for
from harness.units import MiB
from harness.workloads import vision

ENV = "MMHARNESS_GPU_ENGINE_PYTHON"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not os.environ.get(ENV),
                                                  reason=f"{ENV} names no CUDA vLLM interpreter")]
SAMPLING = Sampling(max_tokens=4, ignore_eos=True)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    interpreter = EngineInterpreter(os.environ[ENV], tier="gpu")
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    args = {k: v for k, v in entry.engine_args.items() if k != "dtype"} | {"gpu_memory_utilization": 0.3}
    engine = OfflineEngine(interpreter.build_tiny_model("gemma4"), args, interpreter,
                           Path(tmp_path_factory.mktemp("gpu-encoder")) / "engine.log")
    engine.start()
    yield engine
    assert engine.close() == []


def run(engine, **steer) -> list[dict]:
    work = vision.encoder_workload(4, video_frames=16, videos=1)
    offset = engine.observations.mark()
    with engine.control.steering(**steer):
        engine.chat([r.conversation for r in work.requests], SAMPLING)
    return engine.observations.since(offset)


def test_passes_on_the_real_card_stay_within_the_stated_budget(engine):
    rows = chunks.transients(run(engine))
    assert rows and {r["measured_by"] for r in rows} == {"cuda-allocator-peak"}
    assert all(r["transient_bytes"] > 0 for r in rows)
    chunks.check_transient_within_budget(rows, "the batch")


def test_everything_in_one_pass_against_little_free_memory_is_over_budget(engine):
    rows = chunks.transients(run(engine, memory=(4 * MiB, 40 * MiB), chunk=1 << 30))
    with pytest.raises(CheckFailure) as e:
        chunks.check_transient_within_budget(rows, "the batch")
    assert e.value.cause == "over-budget" and "over the 2.0 MiB budget" in str(e.value)
