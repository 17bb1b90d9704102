"""The quantized load path: does the engine unpack 4-bit weights right?

The seed OOM came with a 4-bit AWQ checkpoint. The CPU tier's tiny builds in
that checkpoint's format (compressed-tensors pack-quantized W4A16) are served
by the engine, and HF transformers runs the same model dequantized by the
harness (harness/references/dequantize.py: the format's documented arithmetic, no code
of the engine's loader). Runs for every quantized tiny build of the tier.

Workload -> run -> checks.
"""
from __future__ import annotations

import pytest

from harness.engines.base import Sampling
from harness.runner import Paired
from harness.runner.declared import Engine
from harness.workloads.text import text_workload

pytestmark = [pytest.mark.quantized, pytest.mark.engine]

# Four prompts of 32 tokens: held past the first split, not to it.
SAMPLING = Sampling(max_tokens=32, ignore_eos=True, logprobs=5)
# The engine (its reference is HF transformers in this process).
ENGINES = (Engine("offline", used_by=("answers",)),)


@pytest.fixture(scope="module")
def answers(runner):
    """Text prompts on the engine, and on HF transformers with the model dequantized."""
    work = text_workload()
    return Paired(runner.batch(work, SAMPLING), runner.dequantized_reference(work, SAMPLING))


@pytest.mark.numeric_paths("w4a16")
def test_engine_agrees_with_the_dequantized_model(answers, check):
    """Each prompt's greedy output on the engine agrees with HF transformers
    on the dequantized model within the noise profile of the host's 4-bit
    path (W4A8 with AMX, else W4A16; noise_profiles.toml): logprobs within
    its bound, a split only within its measured margin and followed on the
    dequantized model past it, so all 32 tokens are held. The comparator
    rejects the other prompts' reference answers. A reference that drops
    the zero points does not agree (tests/test_tiny_models_awq.py)."""
    check.agrees(answers.run, answers.reference, path="w4a16")
