"""Premise guard of a LoRA check: the adapter changes the reference's own output.

A probe adapter proves something about the engine only if the reference
(HF transformers + peft, harness/hf_reference.py) answers differently with
it than without it: otherwise an engine that ignores the adapter agrees with
the reference by accident, and the probe proves nothing.
"""
from __future__ import annotations

from harness.engines.results import Completion


def hf_changes_output(reference_base: Completion, reference_adapter: Completion) -> bool:
    """True when the adapter changed the greedy tokens (or their length or
    finish reason) of the reference's answer to the same prompt."""
    return (list(reference_base.token_ids) != list(reference_adapter.token_ids)
            or reference_base.finish_reason != reference_adapter.finish_reason)


def premise_message(family_or_adapter: str, modality: str) -> str:
    """What a check says when the premise does not hold."""
    return (f"adapter {family_or_adapter} does not change HF's own greedy output on the {modality} "
            f"prompt: the probe proves nothing")
