"""Does an adapter change what it must change, and nothing else?

An adapter "changes" an output when the one comparator (with the noise
profile of the stack both answers came from) rejects the base model's answer
in place of the adapter's: its tokens differ, or a logprob moved beyond the
measured noise (on the CPU tier's one stack: at all). Each function raises
CheckFailure with the cause a report groups by, or Unsupported when the
engine refused the adapter outright:
  no-effect: <group or adapter>  the engine ran the adapter and nothing changed
  premise                         HF + peft itself shows no change: proves nothing
  not-supported: <engine message> the engine refused the adapter (own verdict)
"""
from __future__ import annotations

import re

from harness.checks.comparators import compare_greedy
from harness.checks.noise import NoiseProfile
from harness.checks.requests import check_completed
from harness.verdicts import Cause, CheckFailure, DetailedCause, Unsupported
from harness.engines.outcomes import Completion, Rejected, Result


def changed(with_adapter: Completion, base: Completion, profile: NoiseProfile) -> tuple[bool, str]:
    """(changed beyond the profile's noise?, the comparison in words)."""
    cmp = compare_greedy(with_adapter, base, profile, labels=("adapter", "base"))
    return not cmp.ok, cmp.message


# How an engine says it serves no LoRA for a model (vLLM's LoRA model runner:
# "<Model> does not support LoRA yet.").
NO_LORA = re.compile(r"[\w.]+ does not support LoRA[^\n]*")


# How an engine says it does not serve what a request asks for: only these
# words make a refusal `unsupported`; any other refusal is a failure.
NOT_SUPPORTED = re.compile(r"\b(?:does not|doesn't|do not|cannot|not) support|not supported|unsupported", re.I)


def refused(result: Result) -> str | None:
    """The engine's message when it refused the request saying it does not
    support it (a 4xx, or the offline engine's answer in place of outputs),
    else None: a refusal in other words fails with those words."""
    if (isinstance(result, Rejected) and result.is_client_error and result.message
            and NOT_SUPPORTED.search(result.message)):
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


def as_regression(unsupported: Unsupported, version: str | None, supported: str) -> CheckFailure:
    """An engine refusal where the model matrix says this engine version
    serves the feature: a regression, failed with the engine's words."""
    return CheckFailure(unsupported.cause, f"{unsupported.message}; the model matrix says engine {version} "
                        f"serves LoRA for this model (lora.supported = {supported!r}): a regression",
                        evidence=unsupported.evidence)


def check_premise(hf_adapter: Result, hf_base: Result, what: str, profile: NoiseProfile) -> dict:
    """The adapter changes HF transformers' own output (with peft) by more
    than the engine's noise (`profile`): else the engine check built on it
    proves nothing, and fails saying so."""
    check_completed([hf_adapter, hf_base], [f"{what} (HF + peft)", f"{what} (HF base)"])
    moved, words = changed(hf_adapter, hf_base, profile)
    if not moved:
        raise CheckFailure(Cause.PREMISE, f"{what}: the adapter does not change HF + peft's own "
                                          f"output ({words}): this check would prove nothing",
                           evidence={"hf_premise": words})
    return {"hf_premise": f"HF + peft output changed: {words}"}


def check_takes_effect(with_adapter: Result, base: Result, profile: NoiseProfile, *, adapter: str,
                       group: str | None, input_label: str) -> dict:
    """The engine's output under the adapter is not its base output. A probe
    (`group` given) that changes nothing names the group the engine
    silently ignored."""
    message = refused(with_adapter)
    if message is not None:
        raise Unsupported(f"the engine refused adapter {adapter}"
                          f"{f' (targets {group})' if group else ''}: {message}",
                          evidence={"adapter": adapter, "group": group})
    check_completed([with_adapter, base], [f"{input_label} under {adapter}", f"{input_label} (base)"])
    moved, words = changed(with_adapter, base, profile)
    evidence = {"adapter": adapter, "input": input_label, "effect": words,
                "adapter_tokens": with_adapter.token_ids, "base_tokens": base.token_ids}
    if not moved:
        who = f"the {group} group" if group else f"adapter {adapter}"
        raise CheckFailure(DetailedCause(Cause.NO_EFFECT, group or adapter),
                           f"{who} changed nothing for {input_label}: the engine ran it as the base "
                           f"model ({words})", evidence=evidence)
    return evidence


def untouched(with_adapter: Result, base: Result, profile: NoiseProfile, *, adapter: str,
              input_label: str) -> dict:
    """An adapter leaves an input it cannot reach as the base model answers
    it (a vision-tower adapter and a text prompt)."""
    check_completed([with_adapter, base], [f"{input_label} under {adapter}", f"{input_label} (base)"])
    moved, words = changed(with_adapter, base, profile)
    evidence = {"adapter": adapter, "input": input_label, "comparison": words}
    if moved:
        raise CheckFailure(Cause.MISMATCH, f"adapter {adapter} changed {input_label}, which none of "
                                           f"its modules can reach ({words})", evidence=evidence)
    return evidence


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
