"""pytest plugin: one record per check, closed by one function
(`_close`) and written the moment the check ends.

Which tests are checks: every test under `<rootdir>/scenarios/` and every
test that asks for the `check_record` fixture (directly or through another
fixture). Other tests leave no record. Records no test made come through
the same close: a scenario module that fails to collect (its error record),
a check whose xdist worker died (recorded by the controller) and whatever
another plugin hands to `pytest_mmharness_add_record` (an engine's
teardown check, verdict already decided).

Closing a record: every plugin adds what it knows
(`pytest_mmharness_record`, exactly once), engine identity missing from it
is taken from the run metadata, the known-issues registry is applied, and
a failure gets its log tail. A test's record is closed when its verdict is
decided (the first phase that went wrong, else after teardown), because a
failure matching a known issue must be handed back to pytest as an xfail in
that phase's own report; pytest's counts, its exit status and --junitxml
then all treat it as expected.

Other plugins reach a test's record through `record_of(item)` and report
what the run's engine is through `pytest_mmharness_run_metadata`.

A check the reruns plugin runs again (`pytest_mmharness_failure_to_rerun`)
gets a record per attempt, each closed as any other; the first is held
back, and one record of both is written after the rerun's teardown
(harness/results/attempts.py: `flaky` where the rerun passed).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from harness.verdicts import Cause, CheckFailure, Unsupported, Verdict
from harness.plugins.common import is_check, is_worker, now, worker_id
from harness.results.attempts import cause_text, fold_attempts, rerun_tells, unfinished_rerun
from harness.results.known_issues import KnownIssue, KnownIssuesError, apply_known_issues, load_known_issues
from harness.results.record import CheckRecord, json_safe, record_log_tail
from harness.results.store import RecordWriter, RunLayout, write_json_atomic


@dataclasses.dataclass
class _Recorder:
    known_issues: list[KnownIssue]
    writer: RecordWriter
    # What this process's engines reported through pytest_mmharness_run_metadata.
    reported: dict[str, Any] = dataclasses.field(default_factory=dict)


RECORDER = pytest.StashKey[_Recorder]()
RECORD = pytest.StashKey[CheckRecord]()
# Set once the item's record went through _close.
CLOSED = pytest.StashKey[bool]()
# A check that runs again (the reruns plugin): set between the promise and
# the first attempt's teardown, then the first attempt's record, held back
# until the rerun's is closed.
RERUN_AHEAD = pytest.StashKey[bool]()
FIRST_ATTEMPT = pytest.StashKey[CheckRecord]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness").addoption(
        "--known-issues", default=None,
        help="known-issues TOML registry (default: known_issues.toml at the repo root)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RECORDER] = _Recorder(known_issues=_known_issues(config),
                                       writer=RecordWriter(_layout(config), worker_id(config)))
    if not is_worker(config):
        config.pluginmanager.register(_CollectionErrors(config), "mmharness-collection-errors")


def _known_issues(config: pytest.Config) -> list[KnownIssue]:
    given = config.getoption("known_issues", None)
    path = Path(given) if given else config.rootpath / "known_issues.toml"
    if not given and not path.exists():
        return []
    try:
        return load_known_issues(path)
    except KnownIssuesError as exc:
        raise pytest.UsageError(f"--known-issues: {exc}") from exc


def pytest_unconfigure(config: pytest.Config) -> None:
    recorder = config.stash.get(RECORDER, None)
    if recorder is not None:
        recorder.writer.close()


# -- the one close ------------------------------------------------------------

def _close(config: pytest.Config, record: CheckRecord, item: pytest.Item | None) -> None:
    """Every record ends here, whoever made it; a verdict already set (a
    teardown check's) is kept, except that known issues apply to it."""
    recorder = config.stash[RECORDER]
    record.worker = worker_id(config)
    record.tier = record.tier or config.getoption("tier", None)
    record.started = record.started or now()
    config.hook.pytest_mmharness_record(record=record, item=item)
    for field in ("engine", "engine_version"):
        if getattr(record, field) is None and isinstance(recorder.reported.get(field), str):
            setattr(record, field, recorder.reported[field])
    record.verdict = record.verdict or Verdict.ERROR.value
    apply_known_issues(record, recorder.known_issues)
    if record.log_path and record.verdict not in (Verdict.PASS.value, Verdict.SKIP.value):
        # Kept in the record, so results.json still explains the failure
        # after the run directory has been copied elsewhere.
        record.log_tail = record_log_tail(Path(record.log_path))


def _write(config: pytest.Config, record: CheckRecord) -> None:
    record.finished = now()
    config.stash[RECORDER].writer.append(record)


def pytest_mmharness_add_record(config: pytest.Config, record: CheckRecord) -> bool:
    _close(config, record, None)
    _write(config, record)
    return True


def pytest_mmharness_known_issues(config: pytest.Config) -> list[KnownIssue]:
    return config.stash[RECORDER].known_issues


def _layout(config: pytest.Config) -> RunLayout:
    """The run's files, where the run plugin put the run (through its hook)."""
    return RunLayout(Path(config.hook.pytest_mmharness_run_dir(config=config)))


def pytest_mmharness_run_metadata(config: pytest.Config, fields: dict) -> None:
    """Kept per process in `records/<worker>.meta.json`; the run merges them."""
    recorder = config.stash[RECORDER]
    reported = {**recorder.reported, **json_safe(fields)}
    metadata_file = _layout(config).metadata_file(worker_id(config))
    if reported != recorder.reported or not metadata_file.exists():
        recorder.reported = reported
        write_json_atomic(metadata_file, reported)


# -- tests' records -----------------------------------------------------------

def record_of(item: pytest.Item) -> CheckRecord:
    """The record of a check: other plugins fill in what they know."""
    if RECORD not in item.stash:
        callspec = getattr(item, "callspec", None)
        item.stash[RECORD] = CheckRecord(
            id=item.nodeid, family=_family(item.nodeid),
            params=json_safe(callspec.params) if callspec else {}, started=now())
    return item.stash[RECORD]


def _family(check_id: str) -> str:
    return Path(check_id.split("::", 1)[0]).stem.removeprefix("test_")


@pytest.fixture
def check_record(request: pytest.FixtureRequest) -> CheckRecord:
    """This check's record: fill in model, engine, outputs, evidence...
    The plugin sets the verdict."""
    return record_of(request.node)


def pytest_collection_finish(session: pytest.Session) -> None:
    """How many checks the run means to record, so a run cut short can say
    how much of it is missing. Under xdist only the workers collect, so the
    count is only known without it."""
    if is_worker(session.config) or session.config.option.collectonly:
        return
    collected = sum(1 for item in session.items if is_check(item))
    if collected:
        session.config.hook.pytest_mmharness_run_metadata(
            config=session.config, fields={"checks_collected": collected})


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    # tryfirst makes this the outermost wrapper: it sees the report after
    # pytest's own xfail handling.
    report = yield
    if not is_check(item):
        return report
    record = record_of(item)
    record.durations.setdefault(call.when, round(report.duration, 3))
    _fold_phase(record, report, call)
    if not item.stash.get(CLOSED, False) and (record.is_failure or call.when == "teardown"):
        item.stash[CLOSED] = True
        _close(item.config, record, item)
        if record.verdict == Verdict.KNOWN_ISSUE.value and report.failed:
            _as_expected_failure(report, record)
    if record.verdict == Verdict.UNSUPPORTED.value and report.failed:
        _as_unsupported(report, record)
    if call.when == "teardown":
        _end_attempt(item, record)
    return report


# -- a check run twice ----------------------------------------------------------

def pytest_mmharness_failure_to_rerun(item: pytest.Item) -> str | None:
    """The attempt's cause, where its record (closed at the phase that
    failed) is a failure a rerun can tell; its record is then held back."""
    record = item.stash.get(RECORD, None)
    if (not is_check(item) or record is None or not item.stash.get(CLOSED, False)
            or FIRST_ATTEMPT in item.stash or not rerun_tells(record)):
        return None
    item.stash[RERUN_AHEAD] = True
    return cause_text(record.cause)


def _end_attempt(item: pytest.Item, record: CheckRecord) -> None:
    """After an attempt's teardown: a first attempt to be rerun is set
    aside (the rerun gets a record of its own); otherwise the check's
    record is written, both attempts in one where it ran twice."""
    if item.stash.get(RERUN_AHEAD, False):
        item.stash[RERUN_AHEAD] = False
        record.finished = now()
        item.stash[FIRST_ATTEMPT] = record
        del item.stash[RECORD]
        item.stash[CLOSED] = False
        return
    first = item.stash.get(FIRST_ATTEMPT, None)
    if first is not None:
        del item.stash[FIRST_ATTEMPT]
        record = fold_attempts(first, record)
    _write(item.config, record)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A first attempt whose rerun never reached its teardown (Ctrl-C) is
    written as it stands."""
    try:
        return (yield)
    finally:
        first = item.stash.get(FIRST_ATTEMPT, None)
        if first is not None:
            del item.stash[FIRST_ATTEMPT]
            _write(item.config, unfinished_rerun(first))


def _fold_phase(record: CheckRecord, report: pytest.TestReport, call: pytest.CallInfo) -> None:
    """Fold one phase's outcome into the record. The first phase that went
    wrong decides the verdict; a teardown failure of a passed check (a leak
    check in a fixture, say) still fails it."""
    if report.passed:
        if call.when == "call" and record.verdict is None:
            record.verdict = Verdict.PASS.value
        return
    if hasattr(report, "wasxfail") and report.skipped:
        record.verdict = Verdict.KNOWN_ISSUE.value
        record.known_issue = {"check": "pytest xfail marker", "reason": report.wasxfail}
        record.message = _exception_text(call)
        return
    if report.skipped:
        record.verdict = Verdict.SKIP.value
        record.message = _skip_reason(report)
        return
    if record.verdict not in (None, Verdict.PASS.value):
        record.evidence.setdefault("later_failures", []).append(
            f"{call.when}: {_exception_text(call)}")
        return
    error = call.excinfo.value if call.excinfo else None
    if isinstance(error, Unsupported):
        record.verdict = Verdict.UNSUPPORTED.value
        record.cause, record.message = error.cause, error.message
        record.evidence.update(json_safe(error.evidence))
        return
    if isinstance(error, CheckFailure):
        record.verdict = Verdict.ERROR.value if call.when == "setup" else Verdict.FAIL.value
        record.cause, record.message = error.cause, error.message
        record.divergence = json_safe(error.divergence)
        record.evidence.update(json_safe(error.evidence))
    elif isinstance(error, (AssertionError, pytest.fail.Exception)):
        record.verdict = Verdict.ERROR.value if call.when == "setup" else Verdict.FAIL.value
        record.cause, record.message = Cause.ASSERTION.value, _exception_text(call)
    else:
        record.verdict = Verdict.ERROR.value
        kind = type(error).__name__ if error is not None else "unknown"
        where = "" if call.when == "call" else f" in {call.when}"
        record.cause = f"{Cause.HARNESS.value}: {kind}{where}"
        record.message = _exception_text(call)


def _exception_text(call: pytest.CallInfo) -> str:
    if call.excinfo is None:
        return ""
    return call.excinfo.exconly().strip()[:4000]


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr or "")


def _as_unsupported(report: pytest.TestReport, record: CheckRecord) -> None:
    """Not a failure for pytest either: a skip whose reason is the engine's."""
    report.outcome = "skipped"
    report.longrepr = (str(report.location[0]), report.location[1] or 0, f"{record.cause}")


def _as_expected_failure(report: pytest.TestReport, record: CheckRecord) -> None:
    """pytest's own xfail form: counted as xfailed, not failed, by the
    terminal, the exit status and --junitxml."""
    report.outcome = "skipped"
    report.wasxfail = f"known issue: {record.known_issue['link']}"


# -- records no test made -----------------------------------------------------

class _CollectionErrors:
    """A scenario module that cannot be collected has no tests to leave
    records, so it leaves one itself: otherwise the morning report would not
    show that a whole family never ran. Registered on the controller only
    (xdist workers each report the same error to it)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.seen: set[str] = set()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if not report.failed or not report.nodeid.startswith("scenarios/") or report.nodeid in self.seen:
            return
        self.seen.add(report.nodeid)
        record = CheckRecord(id=report.nodeid, family=_family(report.nodeid),
                             verdict=Verdict.ERROR.value,
                             cause=f"{Cause.HARNESS.value}: collection error",
                             message=str(report.longrepr)[-4000:])
        _close(self.config, record, None)
        _write(self.config, record)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """xdist controller: a worker died inside a check and wrote nothing for
    it. Record that check here, since the dead worker cannot."""
    record = CheckRecord(
        id=crashitem, family=_family(crashitem),
        params={"id": crashitem[crashitem.index("[") + 1:-1]} if crashitem.endswith("]") else {},
        verdict=Verdict.ERROR.value, cause=Cause.ENGINE_DEAD.value,
        message=f"the pytest worker died while running this check (an in-process engine crash, "
                f"an OOM kill or a signal): {report.longrepr}")
    _close(sched.config, record, None)
    if record.verdict == Verdict.KNOWN_ISSUE.value:
        _as_expected_failure(report, record)
    _write(sched.config, record)
