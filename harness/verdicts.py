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


class Cause(str, enum.Enum):
    ENGINE_DEAD = "engine-dead"
    OOM = "oom"
    ILLEGAL_INSTRUCTION = "illegal-instruction"
    PYTHON_EXCEPTION = "python-exception"
    STARTUP_FAILED = "startup-failed"
    TIMEOUT = "timeout"
    LEAK = "leak"
    HTTP_5XX = "http-5xx"
    HTTP_4XX = "http-4xx"
    MISMATCH = "mismatch"
    PREMISE = "premise"
    EMPTY_OUTPUT = "empty-output"
    OVER_BUDGET = "over-budget"
    HARNESS = "harness"
    ASSERTION = "assertion"


class CheckFailure(AssertionError):
    """A check did not hold. `cause` is a Cause value (or a detailed string
    such as 'python-exception: AttributeError: ...'); `evidence` is a small
    JSON-able dict (inputs, first divergence, figures) for the report."""

    def __init__(self, cause: Cause | str, message: str, *, divergence: Any = None,
                 evidence: dict | None = None):
        super().__init__(f"[{cause.value if isinstance(cause, Cause) else cause}] {message}")
        self.cause = cause.value if isinstance(cause, Cause) else str(cause)
        self.message = message
        self.divergence = divergence
        self.evidence = evidence or {}


def check(condition: bool, cause: Cause | str, message: str, **kw: Any) -> None:
    """Raise CheckFailure unless condition holds."""
    if not condition:
        raise CheckFailure(cause, message, **kw)
