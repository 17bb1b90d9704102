"""The search of a bisect, apart from how a version is tried: which version
to probe next, what each outcome means, and the answer.

A probe's outcome is judged against the two ends: the good end passes, the
bad end fails inside the check with a cause, which the answer names. A
version that passes is like the good end; one that fails with the bad end's
cause is like the bad end; one that fails with another cause, cannot run
the check (`untestable`: its engine did not start, or it could not be
installed, or the check did not run), or fails once and passes on its rerun
(`flaky`) is skipped, as `git bisect skip` skips, and named in the answer.
An end that is untestable gives no answer: a version that only failed to
start says nothing of the bug. Both directions: when the good end is the
newer one, the search finds the first fixed version.

Every outcome goes to the store as soon as it is known; the search is a
function of the outcomes, so a bisect that is run again replays what its
store holds and probes only what is new (an interrupted one resumes).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Protocol

PASS, FAIL, UNTESTABLE = "pass", "fail", "untestable"
GOOD, BAD, OTHER_CAUSE, FLAKY = "good", "bad", "other-cause", "flaky"


@dataclass(frozen=True)
class Outcome:
    """One run of the check on one version."""
    status: str                 # PASS, FAIL or UNTESTABLE
    cause: str | None = None    # a failure's cause
    detail: str = ""            # why untestable, or the failure's message
    extra: dict = field(default_factory=dict)  # engine identity, duration, run directory

    @classmethod
    def from_dict(cls, d: dict) -> Outcome:
        return cls(d["status"], d.get("cause"), d.get("detail", ""), d.get("extra", {}))

    def to_dict(self) -> dict:
        return asdict(self)


class Store(Protocol):
    def outcomes(self, version: str) -> list[Outcome]: ...
    def add(self, version: str, outcome: Outcome) -> None: ...


class MemoryStore:
    def __init__(self):
        self._runs: dict[str, list[Outcome]] = {}

    def outcomes(self, version: str) -> list[Outcome]:
        return list(self._runs.get(version, []))

    def add(self, version: str, outcome: Outcome) -> None:
        self._runs.setdefault(version, []).append(outcome)


@dataclass
class Step:
    version: str
    label: str                  # GOOD, BAD, OTHER_CAUSE, UNTESTABLE or FLAKY
    runs: list[Outcome]


@dataclass
class Answer:
    """`first` is the first version like the newer end, `last` the last one
    like the older end; `skipped` lie between them, so the change may lie in
    any of them too. `broken_ends` is set (and the rest empty) when the ends
    do not hold."""
    direction: str              # "first bad" or "first fixed"
    first: str | None = None
    last: str | None = None
    skipped: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    bad_cause: str | None = None
    broken_ends: str | None = None
    advice: str | None = None   # what to try where the ends do not hold (the command's, not the search's)
    note: str | None = None     # what the bisect ran under, where it chose it (a fitted pin)

    @property
    def sentence(self) -> str:
        if self.broken_ends:
            return f"no answer: {self.broken_ends}" + (f"; try {self.advice}" if self.advice else "")
        older = "good" if self.direction == "first bad" else "bad"
        text = f"{self.direction} in {self.first} (last {older} {self.last}); bad: {self.bad_cause}"
        if self.skipped:
            text += f"; or in one of {', '.join(self.skipped)}, which could not be judged"
        return text + (f"; {self.note}" if self.note else "")


def label_of(runs: Sequence[Outcome], bad_cause: str | None) -> str:
    first = runs[0]
    if first.status == UNTESTABLE:
        return UNTESTABLE
    if first.status == PASS:
        return GOOD
    if len(runs) > 1 and (runs[1].status != FAIL or runs[1].cause != first.cause):
        return FLAKY
    return BAD if bad_cause is None or first.cause == bad_cause else OTHER_CAUSE


def bisect(versions: Sequence[str], good: str, bad: str, probe: Callable[[str], Outcome],
           store: Store | None = None, on_step: Callable[[Step, int], None] = lambda step, left: None) -> Answer:
    """`versions` in release order, both ends among them; `probe(version)`
    runs the check once. `on_step(step, left)`: told after each version is
    judged, with a bound on the versions still to probe."""
    store = store if store is not None else MemoryStore()
    order = list(versions)
    for end in (good, bad):
        if end not in order:
            raise ValueError(f"{end} is not among the versions {order}")
    g, b = order.index(good), order.index(bad)
    if g == b:
        raise ValueError("the good and the bad end are the same version")
    direction = "first bad" if g < b else "first fixed"
    answer = Answer(direction)

    def judge(version: str, bad_cause: str | None) -> Step:
        runs = store.outcomes(version)
        if not runs:
            runs = [probe(version)]
            store.add(version, runs[0])
        if runs[0].status == FAIL and len(runs) < 2:  # a failure is confirmed by one rerun
            runs.append(probe(version))
            store.add(version, runs[1])
        step = Step(version, label_of(runs[:2], bad_cause), runs[:2])
        answer.steps.append(step)
        return step

    lo, hi = min(g, b), max(g, b)
    bad_step = judge(bad, None)
    on_step(bad_step, hi - lo)
    good_step = judge(good, None)
    on_step(good_step, hi - lo - 1)
    problems = []
    if good_step.label != GOOD:
        problems.append(f"the good end {good} does not pass ({_said(good_step)})")
    if bad_step.label != BAD:
        problems.append(f"the bad end {bad} does not fail inside the check ({_said(bad_step)})")
    if problems:
        answer.broken_ends = "; ".join(problems)
        return answer
    answer.bad_cause = bad_step.runs[0].cause
    older_label = GOOD if direction == "first bad" else BAD
    newer_label = BAD if direction == "first bad" else GOOD
    skipped: set[int] = set()
    while True:
        candidates = [i for i in range(lo + 1, hi) if i not in skipped]
        if not candidates:
            break
        middle = (lo + hi) / 2
        i = min(candidates, key=lambda i: (abs(i - middle), i))
        step = judge(order[i], answer.bad_cause)
        if step.label == older_label:
            lo = i
        elif step.label == newer_label:
            hi = i
        else:
            skipped.add(i)
        on_step(step, len([j for j in range(lo + 1, hi) if j not in skipped]))
    answer.first, answer.last = order[hi], order[lo]
    answer.skipped = [order[i] for i in sorted(skipped) if lo < i < hi]
    return answer


def _said(step: Step) -> str:
    run = step.runs[0]
    if step.label == FLAKY:
        return f"failed with {run.cause}, then {step.runs[1].status} on its rerun"
    if run.status == FAIL:
        return f"fails with {run.cause}"
    if run.status == UNTESTABLE:
        return f"untestable: {run.detail}"
    return run.status
