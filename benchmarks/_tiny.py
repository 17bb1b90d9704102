"""The CPU tier's tiny Gemma4 as the benchmarks start it, and the greedy
sampling they measure with."""
from __future__ import annotations

from pathlib import Path

from harness.engines.base import Sampling
from harness.engines.interpreter import EngineInterpreter
from harness.models import ModelEntry, models_for

GREEDY_16 = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)


def tiny_gemma4() -> tuple[EngineInterpreter, ModelEntry, Path]:
    """The engine interpreter, the matrix entry and the built model."""
    interpreter = EngineInterpreter()
    entry = next(e for e in models_for("cpu") if e.name == "tiny-gemma4")
    return interpreter, entry, interpreter.build_tiny_model("gemma4")
