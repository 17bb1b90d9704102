"""Checks shared by scenario families. Each raises CheckFailure with the
cause and the input it concerns, so the report can say what broke and on what."""
from __future__ import annotations

from harness.comparators import compare_greedy
from harness.engines.base import Engine
from harness.engines.results import Completion, EngineCrashed, Rejected, Result, cause_of
from harness.verdicts import Cause, CheckFailure


def _evidence(result: Result) -> dict:
    d = result.to_dict()
    if isinstance(result, EngineCrashed):
        d["log_tail"] = d["log_tail"][-40:]
    return d


def check_completed(results: list[Result], labels: list[str]) -> list[Completion]:
    """Every request got an answer; the first that did not names its input."""
    for result, label in zip(results, labels, strict=True):
        if not isinstance(result, Completion):
            detail = getattr(result, "detail", None) or getattr(result, "message", "") or str(result)
            raise CheckFailure(cause_of(result), f"input {label}: no answer: {detail}",
                               evidence={"input": label, "result": _evidence(result)})
    return results


def check_non_empty(results: list[Result], labels: list[str]) -> None:
    check_completed(results, labels)
    empty = [label for r, label in zip(results, labels) if not r.token_ids]
    if empty:
        raise CheckFailure(Cause.EMPTY_OUTPUT, f"empty output for {empty}", evidence={"inputs": empty})


def check_invariant(batched: Result, solo: Result, label: str, *, context: str = "batch") -> dict:
    """A clip's output in a batch equals its output alone (within near-ties)."""
    check_completed([batched, solo], [f"{label} ({context})", f"{label} (solo)"])
    cmp = compare_greedy(batched, solo, labels=(context, "solo"))
    evidence = {"input": label, context: batched.token_ids, "solo": solo.token_ids,
                "comparison": cmp.message}
    if not cmp.ok:
        raise CheckFailure(Cause.MISMATCH, f"input {label}: {cmp.message}",
                           divergence=cmp.divergence.to_dict() if cmp.divergence else None,
                           evidence=evidence)
    return evidence


def check_accepted_or_4xx(result: Result, label: str) -> dict:
    """Hostile or edge input: an answer, or a 4xx with a message. A 5xx, a
    hang or a dead engine is a failure that names the input."""
    if isinstance(result, Completion):
        return {"input": label, "outcome": "answered", "prompt_tokens": result.prompt_token_count}
    if isinstance(result, Rejected) and result.is_client_error and result.message:
        return {"input": label, "outcome": f"rejected {result.status}", "message": result.message}
    raise CheckFailure(cause_of(result), f"input {label}: {getattr(result, 'message', '') or result}",
                       evidence={"input": label, "result": _evidence(result)})


def check_alive(engine: Engine, after: str) -> None:
    try:
        engine.assert_alive()
    except CheckFailure as e:
        raise CheckFailure(e.cause, f"after {after}: {e.message}", evidence=e.evidence) from None
