"""Checks shared by scenario families. Each raises CheckFailure with the
cause and the input it concerns, so the report can say what broke and on what."""
from __future__ import annotations

from harness.checks.comparators import Comparison, Follow, compare_greedy
from harness.checks.noise import NoiseProfile
from harness.verdicts import Cause, CheckFailure
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


def check_invariant(got: Result, ref: Result, label: str, profile: NoiseProfile, *, context: str = "batch",
                    reference: str = "solo", follow: Follow | None = None) -> dict:
    """A request's output in `context` equals its output in `reference` (solo,
    TP 1, HF transformers): the same prompt tokens, then the one comparator
    with the profile of the numeric path between them."""
    check_completed([got, ref], [f"{label} ({context})", f"{label} ({reference})"])
    tokens = {context: got.token_ids, reference: ref.token_ids}
    n, m = got.prompt_token_count, ref.prompt_token_count
    if n is not None and m is not None and n != m:
        raise CheckFailure(Cause.MISMATCH, f"input {label}: {n} prompt tokens in {context}, {m} in {reference}: "
                           f"the engine did not receive the same input", evidence={"input": label, **tokens,
                           "prompt_tokens": {context: n, reference: m}})
    return _held(compare_greedy(got, ref, profile, labels=(context, reference), follow=follow), label, tokens)


def check_power(ref: Result, label: str, wrong: dict[str, Result], profile: NoiseProfile, *,
                reference: str = "solo", follow: Follow | None = None) -> dict:
    """The comparison has power: the comparator that holds `label`'s answer
    to `ref` rejects each wrong answer a plausible bug would give in its
    place (another request's reference, the base model's, another
    adapter's). One it accepts fails the premise, naming the two it cannot
    tell apart. Returns what it rejected and why, for the record."""
    check_completed([ref], [f"{label} ({reference})"])
    rejected = {}
    for name, answer in wrong.items():
        if not isinstance(answer, Completion):  # an unanswered alternative is no answer to mistake
            rejected[name] = {"unanswered": _describe(answer)}
            continue
        cmp = compare_greedy(answer, ref, profile, labels=(name, f"{label} ({reference})"), follow=follow)
        if cmp.ok:
            raise CheckFailure(Cause.PREMISE, f"input {label}: the comparator cannot tell its {reference} answer "
                               f"from {name} ({cmp.message}): this check would pass on that wrong answer",
                               evidence={"input": label, "indistinguishable": name, reference: ref.token_ids,
                                         name: answer.token_ids, "comparison": cmp.to_dict()})
        rejected[name] = {"tokens": answer.token_ids, "rejected": cmp.message}
    return rejected


def _held(cmp: Comparison, label: str, tokens: dict) -> dict:
    """The comparison's evidence, or CheckFailure(MISMATCH) naming the input."""
    evidence = {"input": label, **tokens, "comparison": cmp.message,
                **({"splits": [s.to_dict() for s in cmp.splits]} if cmp.splits else {}),
                **({"unscored_after": cmp.unscored_after} if cmp.unscored_after is not None else {})}
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
    # The server's own words, so that a known issue can name the refusal it registers.
    why = f"a valid input refused ({result.status}: {result.message})" if refused else _describe(result)
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
