"""A failed check run once more, on fresh engines: is its failure the
engine's steady answer, or flaky?

Only a failure a rerun can tell something about is rerun: a failed check
or an error whose cause is the engine's, that no known issue covers. A
harness error (`harness: ...`) is the harness's own, a known issue is
already known, and unsupported checks and skips are no failures.

The check keeps one record, the first attempt's (the failure judged), its
verdict decided by the rerun:
- the rerun passed: `flaky`, the first attempt's cause and message kept;
- it failed with the same cause (the `Cause` value, not the message):
  confirmed, the failure stands;
- it failed with another cause, or skipped: the failure stands (the check
  did not pass on a fresh engine), the rerun's outcome beside it.
Both attempts are listed in `attempts`, whatever came of it.
"""
from __future__ import annotations

from typing import Any

from harness.verdicts import Verdict
from harness.results.record import CheckRecord
from harness.results.status import is_harness_error

# The rerun's outcome, as its entry in `attempts` says it.
FLAKY = "passed: flaky"
CONFIRMED = "the same cause: confirmed"
UNFINISHED = "did not run to its end: the run was interrupted"


def rerun_tells(record: CheckRecord) -> bool:
    """Whether a rerun can tell this failure flaky from confirmed."""
    return record.is_failure and not is_harness_error(record)


def cause_text(cause) -> str | None:
    """A record's cause as its JSON has it: a Cause by its value."""
    return None if cause is None else str(getattr(cause, "value", cause))


def fold_attempts(first: CheckRecord, rerun: CheckRecord) -> CheckRecord:
    """The check's one record: the first attempt's, judged by the rerun.
    The check's time is both attempts' (`durations["rerun"]`)."""
    first.attempts = [_attempt(first), {**_attempt(rerun), "outcome": _outcome(first, rerun)}]
    if rerun.verdict == Verdict.PASS.value:
        first.verdict = Verdict.FLAKY.value
    first.durations["rerun"] = round(rerun.seconds, 3)
    return first


def unfinished_rerun(first: CheckRecord) -> CheckRecord:
    """A first attempt whose rerun never ended (Ctrl-C): its failure stands."""
    first.attempts = [_attempt(first), {"outcome": UNFINISHED}]
    return first


def _outcome(first: CheckRecord, rerun: CheckRecord) -> str:
    if rerun.verdict == Verdict.PASS.value:
        return FLAKY
    if rerun.cause == first.cause:
        return CONFIRMED
    if rerun.is_failure or rerun.verdict == Verdict.KNOWN_ISSUE.value:
        return f"another cause ({cause_text(rerun.cause)}): the failure stands"
    return f"{rerun.verdict}: the failure stands"


def _attempt(record: CheckRecord) -> dict[str, Any]:
    """What a reader needs of one attempt; the engines it ran on are named
    by their log slices."""
    fields = {"verdict": record.verdict, "cause": cause_text(record.cause), "message": record.message,
              "divergence": record.divergence, "known_issue": record.known_issue,
              "engines": record.evidence.get("engines"), "log_path": record.log_path,
              "timeline_path": record.timeline_path,
              "started": record.started, "finished": record.finished,
              "seconds": round(record.seconds, 3)}
    return {key: value for key, value in fields.items() if value not in (None, "", {}, [])}
