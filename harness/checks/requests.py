"""Checks shared by scenario families. Each raises CheckFailure with the
cause and the input it concerns, so the report can say what broke and on what."""
from __future__ import annotations

from harness.checks.comparators import LOGPROB_STEPS, agree_within_top_k, compare_greedy
from harness.checks.verdicts import Cause, CheckFailure
from harness.engines.base import Engine
from harness.engines.outcomes import Completion, EngineCrashed, Rejected, RequestTimedOut, Result, cause_of


def _evidence(result: Result) -> dict:
    d = result.to_dict()
    if isinstance(result, EngineCrashed):
        d["log_tail"] = d["log_tail"][-40:]
    return d


def _describe(result: Result) -> str:
    """What went wrong with a request, in words: never a repr."""
    if isinstance(result, RequestTimedOut):
        return f"no answer within {result.seconds} s"
    if isinstance(result, Rejected):
        return result.message or f"HTTP {result.status} with no message"
    return result.detail or result.cause.value


def check_completed(results: list[Result], labels: list[str]) -> list[Completion]:
    """Every request got an answer; the first that did not names its input."""
    for result, label in zip(results, labels, strict=True):
        if not isinstance(result, Completion):
            raise CheckFailure(cause_of(result), f"input {label}: no answer: {_describe(result)}",
                               evidence={"input": label, "result": _evidence(result)})
    return results


def check_invariant(batched: Result, solo: Result, label: str, *, context: str = "batch",
                    reference: str = "solo", logprob_steps: float = LOGPROB_STEPS) -> dict:
    """A clip's output in a batch equals its output alone (within near-ties);
    `reference` names the side it is held to (solo, TP 1)."""
    check_completed([batched, solo], [f"{label} ({context})", f"{label} ({reference})"])
    return _held(compare_greedy(batched, solo, labels=(context, reference), logprob_steps=logprob_steps), label,
                 {context: batched.token_ids, reference: solo.token_ids})


def check_agreement(engine: Result, reference: Result, label: str, *, labels: tuple[str, str]) -> dict:
    """The engine's greedy output agrees with a reference from another stack
    (HF transformers): token-equal, or at the first difference each side's
    token is in the other's top-5. Logprobs are not held: the stacks'
    kernels differ by design."""
    check_completed([engine, reference], [f"{label} ({labels[1]})", f"{label} ({labels[0]})"])
    return _held(agree_within_top_k(reference, engine, labels=labels), label,
                 {labels[0]: reference.token_ids, labels[1]: engine.token_ids})


def _held(cmp, label: str, tokens: dict) -> dict:
    """The comparison's evidence, or CheckFailure(MISMATCH) naming the input."""
    evidence = {"input": label, **tokens, "comparison": cmp.message}
    if not cmp.ok:
        raise CheckFailure(Cause.MISMATCH, f"input {label}: {cmp.message}",
                           divergence=cmp.divergence.to_dict() if cmp.divergence else None,
                           evidence=evidence)
    return evidence


ANSWER, REFUSE, REFUSE_OR_CAP = "answer", "refuse", "refuse-or-cap"


def check_edge_outcome(result: Result, label: str, expect: str, reference: Result | None = None) -> dict:
    """An edge or hostile input got the outcome it must get:
    - answer: a valid input is answered (with as many prompt tokens as
      `reference`, the same audio in the model's own format, when given);
    - refuse: an invalid input gets a 4xx with a message;
    - refuse-or-cap: a 4xx, or an answer with no more prompt tokens than
      `reference` (the longest input allowed).
    A 5xx, a hang or a dead engine fails naming the input, whatever was expected."""
    evidence = {"input": label, "expected": expect, "result": _evidence(result)}
    refused = isinstance(result, Rejected) and result.is_client_error and bool(result.message)
    if isinstance(result, Completion):
        evidence |= {"outcome": "answered", "prompt_tokens": result.prompt_token_count}
        if expect == REFUSE:
            raise CheckFailure(Cause.WRONG_OUTCOME, f"input {label}: answered, but it must be "
                               f"refused with a 4xx", evidence=evidence)
        if reference is not None:
            _prompt_tokens_match(result, reference, label, expect, evidence)
        return evidence
    if refused and expect != ANSWER:
        return evidence | {"outcome": f"rejected {result.status}", "message": result.message}
    why = "a valid input refused" if refused else _describe(result)
    raise CheckFailure(cause_of(result) or Cause.HTTP_4XX, f"input {label}: {why}", evidence=evidence)


def _prompt_tokens_match(result: Completion, reference: Result, label: str, expect: str,
                         evidence: dict) -> None:
    want = check_completed([reference], [f"{label} (reference)"])[0].prompt_token_count
    got = result.prompt_token_count
    evidence["reference_prompt_tokens"] = want
    if expect == ANSWER and got != want:
        raise CheckFailure(Cause.WRONG_OUTCOME, f"input {label}: {got} prompt tokens, the same audio "
                           f"as 16 kHz mono gives {want}", evidence=evidence)
    if expect == REFUSE_OR_CAP and got > want:
        raise CheckFailure(Cause.WRONG_OUTCOME, f"input {label}: answered with {got} prompt tokens, "
                           f"more than the longest allowed input's {want}", evidence=evidence)


def check_alive(engine: Engine, after: str) -> None:
    try:
        engine.assert_alive()
    except CheckFailure as e:
        raise CheckFailure(e.cause, f"after {after}: {e.message}", evidence=e.evidence) from None
