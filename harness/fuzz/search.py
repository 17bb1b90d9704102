"""The budgeted search: hypothesis draws specs, a judge runs each against
the engine, and a failure is shrunk to the smallest spec that still fails
with the same cause.

- Same cause: each cause gets an exception type of its own, and hypothesis
  shrinks a failure only through examples that raise its type; then each
  request and item is left out in turn while the cause holds (`_pared`).
- Budget: the search draws new examples for `budget_s`, in rounds of ROUND
  examples; a failure found gets `shrink_s` more to shrink. Past either,
  examples pass unjudged, which ends hypothesis's round at once, so no
  engine time is spent after them.
- Each spec is judged once: a repeat (a shrink candidate tried again, the
  final replay of the shrunk case) gets the verdict already reached.
- Reproducible: the seed drives every draw; the example database (a
  directory) keeps each failure found, and tries it first the next time.
"""
from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as seeded
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from harness.checks.verdicts import CheckFailure
from harness.fuzz.space import canonical, shape


# Examples per hypothesis run: small, so that a run ends soon after the budget.
ROUND = 10


class Inconclusive(Exception):
    """An example the judge cannot decide (two requests whose references
    the comparator cannot tell apart, say): counted, never a failure."""


class CaseFailed(Exception):
    """A judged example failed; one subclass per cause (see `_failed`)."""

    def __init__(self, failure: CheckFailure, spec: dict):
        super().__init__(str(failure))
        self.failure, self.spec = failure, spec


_BY_CAUSE: dict[str, type[CaseFailed]] = {}


def _failed(failure: CheckFailure, spec: dict) -> CaseFailed:
    cause = failure.cause.value
    if cause not in _BY_CAUSE:
        _BY_CAUSE[cause] = type(f"CaseFailed[{cause}]", (CaseFailed,), {})
    return _BY_CAUSE[cause](failure, spec)


@dataclass
class Found:
    """One failure, shrunk: the smallest spec that fails with its cause,
    and the failure it raised."""
    failure: CheckFailure
    spec: dict

    @property
    def cause(self) -> str:
        return self.failure.cause.value

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def divergence(self) -> dict | None:
        return self.failure.divergence

    def to_dict(self) -> dict:
        return {"cause": self.cause, "message": self.message, "shape": shape(self.spec), "spec": self.spec,
                "divergence": self.divergence, "evidence": self.failure.evidence}


@dataclass
class Search:
    """What a search did: its seed and budget, the examples it judged (by
    shape), those it could not decide, the failures it found, its time."""
    seed: int
    budget_s: float
    shrink_s: float
    examples: int = 0
    inconclusive: Counter = field(default_factory=Counter)
    shapes: Counter = field(default_factory=Counter)
    found: list[Found] = field(default_factory=list)
    seconds: float = 0.0
    search_seconds: float = 0.0  # until the first failure, or the whole search without one

    def to_dict(self) -> dict:
        return {"seed": self.seed, "budget_s": self.budget_s, "shrink_s": self.shrink_s,
                "examples": self.examples, "inconclusive": dict(self.inconclusive),
                "shapes": dict(self.shapes.most_common()), "seconds": round(self.seconds, 1),
                "search_seconds": round(self.search_seconds, 1),
                "found": [f.to_dict() for f in self.found]}


def search(strategy, judge: Callable[[dict], None], *, budget_s: float, seed: int, database: Path,
           shrink_s: float | None = None) -> Search:
    """Run `judge(spec)` over specs drawn from `strategy`. The judge
    returns (the property held), raises CheckFailure (it did not: the cause
    is the failure's) or Inconclusive. Rounds of ROUND examples, round r
    seeded `seed + r`, until the budget is spent or a round found a failure
    (and shrank it)."""
    out = Search(seed=seed, budget_s=budget_s, shrink_s=budget_s if shrink_s is None else shrink_s)
    verdicts: dict[str, CheckFailure | Inconclusive | None] = {}
    started = time.monotonic()
    first_failure: list[float] = []

    def spent() -> bool:
        if first_failure:
            return time.monotonic() - first_failure[0] > out.shrink_s
        return time.monotonic() - started > out.budget_s

    def judged(spec: dict) -> None:
        key = canonical(spec)
        if key not in verdicts:
            if spent():  # passed unjudged: hypothesis ends its round at once (never recorded as judged)
                return
            out.examples += 1
            out.shapes[shape(spec)] += 1
            try:
                judge(spec)
                verdicts[key] = None
            except Inconclusive as why:
                verdicts[key] = why
                out.inconclusive[str(why)] += 1
            except CheckFailure as failure:
                verdicts[key] = failure
                if not first_failure:
                    first_failure.append(time.monotonic())
        verdict = verdicts[key]
        if isinstance(verdict, Inconclusive):
            reject()
        if isinstance(verdict, CheckFailure):
            raise _failed(verdict, spec)

    db = DirectoryBasedExampleDatabase(str(database))
    for round_no in itertools.count():
        if spent() or out.found:
            break
        before = out.examples
        out.found = _round(strategy, judged, db, seed + round_no)
        if out.examples == before and not out.found:  # a small space, all of it judged already
            break

    def verdict(spec: dict) -> CheckFailure | None:
        try:
            judged(spec)
        except CaseFailed as failed:
            return failed.failure
        except Exception:  # noqa: BLE001 (hypothesis's reject: inconclusive; spent: not judged)
            return None
        return None
    out.found = [_pared(f, verdict, spent) for f in out.found]
    out.seconds = time.monotonic() - started
    out.search_seconds = (first_failure[0] if first_failure else time.monotonic()) - started
    return out


def _round(strategy, judged: Callable[[dict], None], db, seed: int) -> list[Found]:
    """One hypothesis run of ROUND examples: the database's failures first,
    then new draws, then the shrinking of any failure."""
    run = settings(database=db, max_examples=ROUND, deadline=None, derandomize=False,
                   report_multiple_bugs=True, print_blob=False, verbosity=Verbosity.quiet,
                   suppress_health_check=list(HealthCheck),
                   phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))(
        seeded(seed)(given(strategy)(judged)))
    try:
        run()
    except CaseFailed as one:
        return [_found(one)]
    except BaseExceptionGroup as group:
        cases, other = group.split(CaseFailed)
        if other is not None:  # a harness error beside the failures: it is the harness's to fix
            raise other
        return [_found(e) for e in _leaves(cases)]
    except Unsatisfiable:  # every draw of the round inconclusive
        pass
    return []


def _pared(found: Found, verdict: Callable[[dict], CheckFailure | None], spent: Callable[[], bool]) -> Found:
    """Hypothesis's shrink, then one request, or one item, left out at a
    time while the same cause still fails, until none can go (hypothesis
    can stall on a list drawn unique: a request it cannot delete)."""
    spec, failure = found.spec, found.failure
    smaller = True
    while smaller and "requests" in spec and not spent():
        smaller = False
        for candidate in _one_less(spec):
            got = verdict(candidate)
            if got is not None and got.cause.value == failure.cause.value:
                spec, failure, smaller = candidate, got, True
                break
    return Found(failure, spec)


def _one_less(spec: dict):
    """The spec with one request left out, then with one item left out."""
    requests = spec["requests"]
    if len(requests) > 1:
        for i in range(len(requests)):
            yield {**spec, "requests": requests[:i] + requests[i + 1:]}
    for i, r in enumerate(requests):
        for j in range(len(r["items"])):
            fewer = {**r, "items": r["items"][:j] + r["items"][j + 1:]}
            yield {**spec, "requests": requests[:i] + [fewer] + requests[i + 1:]}


def _leaves(group: BaseExceptionGroup) -> list[CaseFailed]:
    return [leaf for e in group.exceptions for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])]


def _found(case: CaseFailed) -> Found:
    return Found(case.failure, case.spec)
