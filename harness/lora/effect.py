"""Premise guards of a LoRA check: the adapter changes the reference's own output.

A probe adapter proves something about the engine only if the reference
(HF transformers + peft, harness/hf_reference.py) answers differently with
it than without it: otherwise an engine that ignores the adapter agrees with
the reference by accident, and the probe proves nothing.

Two strengths. `hf_changes_output`: the greedy tokens differ. That is not
enough where the check tolerates near-ties: the reference's own answer
without the adapter is what an engine ignoring the adapter would give, and
the comparator may accept it (benchmarks/lora_hf_agreement.py: on the tiny
Gemma4 a vision.q probe moves the first token, yet the two first tokens are
in each other's top-5). `comparator_sees_adapter` asks the check's own
comparator to refuse the unadapted answer: the premise a check needs.
"""
from __future__ import annotations

from collections.abc import Callable

from harness.comparators import Comparison, agree_within_top_k
from harness.engines.results import Completion


def hf_changes_output(reference_base: Completion, reference_adapter: Completion) -> bool:
    """True when the adapter changed the greedy tokens (or their length or
    finish reason) of the reference's answer to the same prompt."""
    return (list(reference_base.token_ids) != list(reference_adapter.token_ids)
            or reference_base.finish_reason != reference_adapter.finish_reason)


def comparator_sees_adapter(reference_base: Completion, reference_adapter: Completion,
                            compare: Callable[..., Comparison] = agree_within_top_k) -> bool:
    """True when `compare` (the check's comparator, reference first) refuses
    the reference's answer without the adapter in place of its answer with
    it: only then can the check catch an engine that ignores the adapter."""
    return not compare(reference_adapter, reference_base, labels=("with adapter", "without")).ok


def premise_message(adapter: str, modality: str) -> str:
    """What a check says when the premise does not hold."""
    return (f"adapter {adapter} does not change HF's own greedy output on the {modality} prompt "
            f"beyond the comparator's tolerance: the probe proves nothing")
