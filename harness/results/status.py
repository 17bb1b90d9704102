"""The exit statuses of a run and of `python -m harness report ...`, in one
place, so that a pipeline can act on them. pytest's own meanings are kept
where they fit (1 failed, 2 interrupted, 3 internal error, 4 usage, 5
nothing collected); flaky checks are 7, pytest-rerunfailures'
`--fail-on-flaky` status, which pytest leaves free.

Ranked, where a run has several: 3 (harness error), 1 (new findings), 2
(interrupted or incomplete), 7 (flaky), 0. A flaky check beside a new
finding is still a run with findings; a run cut short cannot vouch for
the checks it never reached, flaky or not."""
from __future__ import annotations

import enum

from harness.verdicts import Cause, Verdict
from harness.results.record import CheckRecord
from harness.results.run import RunResults


class ExitStatus(enum.IntEnum):
    OK = 0                # nothing new: no failure beyond known issues
    FINDINGS = 1          # new engine findings: a check failed, an engine crashed or leaked
    INTERRUPTED = 2       # the run did not go to its end (Ctrl-C, pytest.exit, killed)
    HARNESS_ERROR = 3     # the harness itself broke: a check raised in its code, lost records
    USAGE = 4             # bad options or input, or preflight found the set-up cannot run
    NOTHING_SELECTED = 5  # no check matched the selection (pytest's own)
    FLAKY = 7             # nothing else new, but a failure did not come back on a rerun: the engine's nondeterminism

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    ExitStatus.OK: "nothing new",
    ExitStatus.FINDINGS: "new engine findings",
    ExitStatus.INTERRUPTED: "interrupted: the run did not go to its end",
    ExitStatus.HARNESS_ERROR: "harness error",
    ExitStatus.USAGE: "usage or set-up error",
    ExitStatus.NOTHING_SELECTED: "no check selected",
    ExitStatus.FLAKY: "flaky checks: failures that did not come back on a rerun",
}


def is_harness_error(record: CheckRecord) -> bool:
    """A failure of the harness's own code (cause `harness: ...`), not of
    the engine, in the check or in its rerun."""
    causes = [record.cause] + [a.get("cause") for a in record.attempts or []]
    return any(str(cause or "").split(":", 1)[0] == Cause.HARNESS.value for cause in causes)


def failures_status(failures: list[CheckRecord]) -> ExitStatus:
    """A harness error outranks an engine finding: findings next to a broken
    harness may be the harness's."""
    if any(is_harness_error(r) for r in failures):
        return ExitStatus.HARNESS_ERROR
    return ExitStatus.FINDINGS if failures else ExitStatus.OK


def unsupported_after_pass(results: RunResults, passed_before: set[str]) -> list[CheckRecord]:
    """Checks the engine now says it does not support, that passed in the
    previous run: a feature that went away is a finding."""
    return [r for r in results.records if r.verdict == Verdict.UNSUPPORTED.value and r.id in passed_before]


def run_status(results: RunResults, pytest_status: int = ExitStatus.OK, passed_before: set[str] = frozenset()) -> int:
    """The status of a finished run from its merged results and pytest's own
    status. A status that already says the run went wrong (interrupted,
    usage, internal error, a plugin's pytest.exit code) is kept as it is;
    known issues and skips never fail the run, nor does `unsupported`
    unless the check passed in the previous run (`passed_before`)."""
    if pytest_status not in (ExitStatus.OK, ExitStatus.FINDINGS, ExitStatus.NOTHING_SELECTED):
        return pytest_status
    if results.problems:  # an unreadable record line may hide a failure
        return ExitStatus.HARNESS_ERROR
    status = failures_status(results.failures + unsupported_after_pass(results, passed_before))
    if status != ExitStatus.OK:
        return status
    if pytest_status == ExitStatus.FINDINGS:  # a failure pytest saw and no record holds
        return ExitStatus.FINDINGS
    if not results.complete:  # pytest.exit(returncode=0), a killed run rendered afterwards
        return ExitStatus.INTERRUPTED
    if results.flaky:
        return ExitStatus.FLAKY
    return pytest_status


def describe(status: int) -> str:
    """`3 (harness error)`; a status of no meaning here is given as it is."""
    try:
        return f"{status} ({ExitStatus(status).meaning})"
    except ValueError:
        return str(status)
