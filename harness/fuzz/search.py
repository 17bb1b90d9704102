"""The budgeted search: hypothesis draws specs, a judge runs each against
the engine, and a failure is shrunk to the smallest spec that still fails
with the same cause.

- Same cause: each failure signature (its cause class, with the exception
  type or HTTP status that tells failures of one class apart) gets an
  exception type of its own, and hypothesis shrinks a failure only through
  examples that raise its type; then each request and item is left out in
  turn while the signature holds (`_pared`).
- Past a failure: once shrunk, its signature is known, and the search goes
  on exploring for the rest of its budget; an example failing with a known
  signature is counted (`again`) and passed over, so a failure that the
  database brings back every run (a registered finding) never ends the
  exploration for a new one.
- Budget: the search explores for `budget_s`, in rounds of ROUND examples;
  each round that finds a new failure gets `shrink_s` to shrink it, not
  counted against the exploration. Past either, examples pass unjudged,
  which ends hypothesis's round at once, so no engine time is spent after
  them.
- Each spec is judged once: a repeat (a shrink candidate tried again, the
  final replay of the shrunk case) gets the verdict already reached.
- Reproducible: the seed drives every draw; the example database (a
  directory) keeps each failure found, as shrunk, and the search replays
  them first, each once and not shrunk again: each shrink candidate of an
  engine-killing failure costs an engine restart, tens of seconds on the
  CPU tier. Then the rounds
  draw new examples, leaving the database's entries be (hypothesis drops an
  entry that no longer fails, and a known one is passed over there).
"""
from __future__ import annotations

import itertools
import time
from unittest import SkipTest
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
from hypothesis import seed as seeded
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable

from harness.verdicts import Cause, CheckFailure
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


_BY_SIGNATURE: dict[str, type[CaseFailed]] = {}


def signature(failure: CheckFailure) -> str:
    """What tells one failure from another while its details shift under
    shrinking: the cause class, with a python exception's type or a 5xx's
    status (as known issues are narrowed, harness.results.known_issues)."""
    kind = failure.cause.value.split(":", 1)[0]
    if kind == Cause.PYTHON_EXCEPTION.value:
        detail = failure.cause.value.split(":", 2)
        return f"{kind}: {detail[1].strip()}" if len(detail) > 1 else kind
    if kind == Cause.HTTP_5XX.value:
        result = failure.evidence.get("result")
        status = result.get("rejected") if isinstance(result, dict) else None
        return f"{kind}: {status}" if status else kind
    return kind


def _failed(failure: CheckFailure, spec: dict) -> CaseFailed:
    key = signature(failure)
    if key not in _BY_SIGNATURE:
        _BY_SIGNATURE[key] = type(f"CaseFailed[{key}]", (CaseFailed,), {})
    return _BY_SIGNATURE[key](failure, spec)


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
    def signature(self) -> str:
        return signature(self.failure)

    @property
    def message(self) -> str:
        return self.failure.message

    @property
    def divergence(self) -> dict | None:
        return self.failure.divergence

    @property
    def shape(self) -> str:
        return shape(self.spec)

    def to_dict(self) -> dict:
        return {"cause": self.cause, "message": self.message, "shape": self.shape, "spec": self.spec,
                "divergence": self.divergence, "evidence": self.failure.evidence}


@dataclass
class Search:
    """What a search did: its seed and budget, the examples it judged (by
    shape), those it could not decide, the failures it found, the examples
    that failed again with a signature already found, its time."""
    seed: int
    budget_s: float
    shrink_s: float
    examples: int = 0
    inconclusive: Counter = field(default_factory=Counter)
    shapes: Counter = field(default_factory=Counter)
    found: list[Found] = field(default_factory=list)
    again: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    search_seconds: float = 0.0  # until the first failure, or the whole search without one
    # When the example that failed first was drawn: within the budget, though judged past it.
    first_failure_drawn_s: float | None = None

    def to_dict(self) -> dict:
        return {"seed": self.seed, "budget_s": self.budget_s, "shrink_s": self.shrink_s,
                "examples": self.examples, "inconclusive": dict(self.inconclusive),
                "shapes": dict(self.shapes.most_common()), "seconds": round(self.seconds, 1),
                "search_seconds": round(self.search_seconds, 1),
                "first_failure_drawn_s": None if self.first_failure_drawn_s is None
                else round(self.first_failure_drawn_s, 1), "again": dict(self.again),
                "found": [f.to_dict() for f in self.found]}


def search(strategy, judge: Callable[[dict], None], *, budget_s: float, seed: int, database: Path,
           shrink_s: float | None = None) -> Search:
    """Run `judge(spec)` over specs drawn from `strategy`. The judge
    returns (the property held), raises CheckFailure (it did not: the
    failure's signature names it) or Inconclusive. Rounds of ROUND
    examples, round r seeded `seed + r`, until the exploration budget is
    spent or a round judges nothing new; each new failure is shrunk."""
    out = Search(seed=seed, budget_s=budget_s, shrink_s=budget_s if shrink_s is None else shrink_s)
    verdicts: dict[str, CheckFailure | Inconclusive | None] = {}
    clock = _Clock(out.budget_s, out.shrink_s)
    known: set[str] = set()
    # The database's failures are judged for the shrink allowance, whatever
    # the exploring budget: they stand for the shrink they spare (a database
    # of 109 entries took 157 s to replay unbounded, in make run).
    replaying = True

    def judged(spec: dict) -> None:
        key = canonical(spec)
        if key not in verdicts:
            if (clock.elapsed() > out.shrink_s) if replaying else clock.spent():
                return  # passed unjudged: hypothesis ends its round at once
            out.examples += 1
            out.shapes[shape(spec)] += 1
            drawn = clock.elapsed()
            try:
                judge(spec)
                verdicts[key] = None
            except Inconclusive as why:
                verdicts[key] = why
                out.inconclusive[str(why)] += 1
            except CheckFailure as failure:
                verdicts[key] = failure
                if signature(failure) in known:
                    out.again[signature(failure)] += 1
                else:
                    if out.first_failure_drawn_s is None:
                        out.first_failure_drawn_s = drawn
                    clock.shrinking()
        verdict = verdicts[key]
        if isinstance(verdict, Inconclusive) or (isinstance(verdict, CheckFailure) and signature(verdict) in known):
            reject()
        if isinstance(verdict, CheckFailure):
            raise _failed(verdict, spec)

    def verdict(spec: dict) -> CheckFailure | None:
        try:
            judged(spec)
        except CaseFailed as failed:
            return failed.failure
        except Exception:  # noqa: BLE001 (hypothesis's reject: inconclusive or known; spent: not judged)
            return None
        return None

    db = DirectoryBasedExampleDatabase(str(database))
    # The database's failures, replayed as they were shrunk (see the module's note).
    out.found += _round(strategy, judged, db, seed, phases=(Phase.reuse,))
    known.update(f.signature for f in out.found)
    replaying = False
    clock.exploring()
    for round_no in itertools.count():
        if clock.spent():
            break
        before = out.examples
        found = _round(strategy, judged, db, seed + round_no, phases=(Phase.explicit, Phase.generate, Phase.shrink))
        found = [_pared(f, verdict, clock.spent) for f in found if f.signature not in known]
        out.found += found
        known.update(f.signature for f in found)
        clock.exploring()
        if out.examples == before and not found:  # a small space, all of it judged already
            break
    out.seconds = clock.elapsed()
    out.search_seconds = clock.first_failure if clock.first_failure is not None else out.seconds
    return out


class _Clock:
    """The search's two allowances: exploring (`budget_s` in all) and, from
    a new failure to the end of its round's shrinking, `shrink_s`."""

    def __init__(self, budget_s: float, shrink_s: float):
        self.budget_s, self.shrink_s = budget_s, shrink_s
        self.started = self.since = time.monotonic()
        self.explored = 0.0
        self.shrink_began: float | None = None
        self.first_failure: float | None = None  # seconds from the start

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spent(self) -> bool:
        now = time.monotonic()
        if self.shrink_began is not None:
            return now - self.shrink_began > self.shrink_s
        return self.explored + (now - self.since) > self.budget_s

    def shrinking(self) -> None:
        if self.shrink_began is None:
            self.shrink_began = time.monotonic()
            self.explored += self.shrink_began - self.since
            if self.first_failure is None:
                self.first_failure = self.shrink_began - self.started

    def exploring(self) -> None:
        if self.shrink_began is not None:
            self.shrink_began, self.since = None, time.monotonic()


def _round(strategy, judged: Callable[[dict], None], db, seed: int, *, phases: tuple) -> list[Found]:
    """One hypothesis run of ROUND examples, in these phases: the database's
    failures (reuse), new draws (generate), the shrinking of any failure."""
    run = settings(database=db, max_examples=ROUND, deadline=None, derandomize=False,
                   report_multiple_bugs=True, print_blob=False, verbosity=Verbosity.quiet,
                   suppress_health_check=list(HealthCheck), phases=phases)(
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
    except SkipTest:  # nothing to run: a database phase on an empty database
        pass
    return []


def _pared(found: Found, verdict: Callable[[dict], CheckFailure | None], spent: Callable[[], bool]) -> Found:
    """Hypothesis's shrink, then one request, or one item, left out at a
    time while the same signature still fails, until none can go
    (hypothesis can stall on a list drawn unique: a request it cannot delete)."""
    spec, failure = found.spec, found.failure
    smaller = True
    while smaller and "requests" in spec and not spent():
        smaller = False
        for candidate in _one_less(spec):
            got = verdict(candidate)
            if got is not None and signature(got) == found.signature:
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
