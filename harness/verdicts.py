"""The one list of verdicts and causes, and the failure a check raises.

A check that fails raises `CheckFailure` (an AssertionError, so plain pytest
reads it as a failed test); the results plugin turns it into a record with
the cause and evidence attached.
"""
from __future__ import annotations

import enum
from typing import Any


class Verdict(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    SKIP = "skip"
    KNOWN_ISSUE = "known issue"
    # The engine says it does not serve what the check needs (LoRA for this
    # model, a target module): reported with the engine's message, not failed.
    UNSUPPORTED = "unsupported"
    # A failure whose cause did not come back when the check ran again on
    # fresh engines (harness/results/attempts.py): the engine's
    # nondeterminism, a finding of its own kind.
    FLAKY = "flaky"


class Cause(str, enum.Enum):
    ENGINE_DEAD = "engine-dead"
    OOM = "oom"
    ILLEGAL_INSTRUCTION = "illegal-instruction"
    PYTHON_EXCEPTION = "python-exception"
    STARTUP_FAILED = "startup-failed"
    TIMEOUT = "timeout"
    # A request in flight made no progress for the stall bound while the
    # engine was alive (harness.engines.progress): given up on, with stacks.
    HANG = "hang"
    LEAK = "leak"
    # Under steady load, the last timeslice's latency beyond the first's by more than the tier's bound.
    DRIFT = "drift"
    # Fewer requests than the tier asks met its latency SLO (goodput).
    SLO = "slo"
    HTTP_5XX = "http-5xx"
    HTTP_4XX = "http-4xx"
    MISMATCH = "mismatch"
    PREMISE = "premise"
    EMPTY_OUTPUT = "empty-output"
    OVER_BUDGET = "over-budget"
    # The engine answered an input it must refuse, or made more of it than allowed.
    WRONG_OUTCOME = "wrong-outcome"
    # An adapter ran and changed nothing it targets (a module silently not wrapped).
    NO_EFFECT = "no-effect"
    # The engine refused a feature or input outright, with its message.
    NOT_SUPPORTED = "not-supported"
    HARNESS = "harness"
    ASSERTION = "assertion"


MAX_CAUSE_CHARS = 300


class DetailedCause(str):
    """A cause class with the detail that tells failures of that class apart,
    read as "class: detail" (e.g. "python-exception: KeyError: 'frames'").

    A str, like Cause, so that it is the record's cause field as it stands:
    known issues and history key on that text."""

    kind: Cause
    detail: str

    def __new__(cls, kind: Cause, detail: str):
        # A cause is a key, not a message: bounded, as records have always had it.
        text = f"{kind.value}: {detail}"[:MAX_CAUSE_CHARS]
        self = super().__new__(cls, text)
        self.kind, self.detail = kind, text[len(kind.value) + 2:]
        return self

    def __getnewargs__(self):  # copy and pickle rebuild it from its parts
        return self.kind, self.detail

    @property
    def value(self) -> str:
        """The record's text, as Cause.value is."""
        return str(self)

    def __repr__(self) -> str:
        return f"DetailedCause({self.kind}, {self.detail!r})"


AnyCause = Cause | DetailedCause


class CheckFailure(AssertionError):
    """A check did not hold. `cause` is a Cause, or a DetailedCause such as
    'python-exception: AttributeError: ...'; `evidence` is a small JSON-able
    dict (inputs, first divergence, figures) for the report."""

    def __init__(self, cause: AnyCause, message: str, *, divergence: Any = None,
                 evidence: dict | None = None):
        if not isinstance(cause, (Cause, DetailedCause)):
            raise TypeError(f"a cause is a Cause or a DetailedCause, not {cause!r}")
        super().__init__(f"[{cause.value}] {message}")
        self.cause = cause
        self.message = message
        self.divergence = divergence
        self.evidence = evidence or {}


class Unsupported(Exception):
    """The engine does not serve what this check needs, and said so: the
    check's verdict is UNSUPPORTED, its cause `not-supported: <engine's
    message>`. Raised only on the engine's own refusal, never as a guess."""

    def __init__(self, message: str, *, evidence: dict | None = None):
        super().__init__(message)
        self.cause = DetailedCause(Cause.NOT_SUPPORTED, message)
        self.message = message
        self.evidence = evidence or {}
