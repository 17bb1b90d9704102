"""pytest plugin: one record per check, written the moment the check ends;
at the end of the session, results.json, the history line, report.html,
the `latest` pointer and a one-line summary.

Which tests are checks: every test under `<rootdir>/scenarios/` and every
test that asks for the `check_record` fixture (directly or through another
fixture). A scenario module that fails to collect leaves an error record
of its own. Other tests leave no record, and a session with no check
leaves no run directory behind.

The run directory is --results-dir or `<rootdir>/reports/run-<UTC time>`;
`latest` beside it is a symlink to the newest run, and --history
(`<rootdir>/reports/history.jsonl`) gets one line per run.

Under xdist each worker appends to its own `records/<worker>.jsonl` in the
controller's run directory; the controller merges them. A failure matching
the known-issues registry is handed back to pytest as an xfail, so pytest's
own counts, its exit status and --junitxml all treat it as expected.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from harness.results.attachments import attach
from harness.results.history import append_history, failing_since, history_entry, read_history
from harness.results.known_issues import KnownIssue, KnownIssuesError, apply_known_issues, load_known_issues
from harness.results.merge import merge_run
from harness.results.metadata import collect_host_metadata
from harness.results.record import CheckRecord, json_safe
from harness.results.run import ResultsError, RunResults, load_results
from harness.results.store import RecordWriter, RunLayout, write_json_atomic
from harness.verdicts import Cause, CheckFailure, DetailedCause, Verdict

WORKERINPUT_RUN_DIR = "mmharness_run_dir"
WORKERINPUT_STARTED = "mmharness_started"


@dataclasses.dataclass
class _Session:
    layout: RunLayout
    worker: str
    started: str
    known_issues: list[KnownIssue]
    history_path: Path
    baseline_path: Path | None
    results_dir_given: bool
    writer: RecordWriter
    # What this process's engine fixtures reported through set_run_metadata.
    reported: dict[str, Any] = dataclasses.field(default_factory=dict)
    results: RunResults | None = None


SESSION = pytest.StashKey[_Session]()
RECORD = pytest.StashKey[CheckRecord]()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    root = config.rootpath
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        run_dir = Path(workerinput[WORKERINPUT_RUN_DIR])
        worker, started = workerinput["workerid"], workerinput[WORKERINPUT_STARTED]
    else:
        started = _now()
        given = config.getoption("results_dir", None)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        run_dir = Path(given) if given else root / "reports" / f"run-{stamp}"
        worker = "main"
    layout = RunLayout(run_dir.resolve())
    config.stash[SESSION] = _Session(
        layout=layout, worker=worker, started=started,
        known_issues=_known_issues(config, root),
        history_path=Path(config.getoption("history", None) or root / "reports" / "history.jsonl"),
        baseline_path=_baseline(config),
        results_dir_given=bool(config.getoption("results_dir", None)),
        writer=RecordWriter(layout, worker))
    if workerinput is None:
        config.pluginmanager.register(_CollectionErrors(config), "mmharness-collection-errors")


def _known_issues(config: pytest.Config, root: Path) -> list[KnownIssue]:
    given = config.getoption("known_issues", None)
    path = Path(given) if given else root / "known_issues.toml"
    if not given and not path.exists():
        return []
    try:
        return load_known_issues(path)
    except KnownIssuesError as exc:
        raise pytest.UsageError(f"--known-issues: {exc}") from exc


def _baseline(config: pytest.Config) -> Path | None:
    given = config.getoption("baseline", None)
    if not given:
        return None
    # Found wanting now rather than after a night of checks.
    try:
        return load_results(Path(given)).path
    except ResultsError as exc:
        raise pytest.UsageError(f"--baseline: {exc}") from exc


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: every worker writes into the controller's run dir."""
    state = node.config.stash[SESSION]
    node.workerinput[WORKERINPUT_RUN_DIR] = str(state.layout.run_dir)
    node.workerinput[WORKERINPUT_STARTED] = state.started


def set_run_metadata(config: pytest.Config, **fields: Any) -> None:
    """Record what this run's engine is (engine, engine_version, torch,
    device, ...). Called by the engine fixtures, on whichever worker they
    run; the controller merges what every worker reported."""
    state = config.stash[SESSION]
    reported = {**state.reported, **json_safe(fields)}
    if reported != state.reported or not state.layout.metadata_file(state.worker).exists():
        state.reported = reported
        write_json_atomic(state.layout.metadata_file(state.worker), reported)


def _is_check(item: pytest.Item) -> bool:
    scenarios = item.config.rootpath / "scenarios"
    return "check_record" in getattr(item, "fixturenames", ()) or scenarios in item.path.parents


def record_for(item: pytest.Item) -> CheckRecord:
    if RECORD not in item.stash:
        callspec = getattr(item, "callspec", None)
        item.stash[RECORD] = CheckRecord(
            id=item.nodeid,
            family=item.path.stem.removeprefix("test_"),
            params=json_safe(callspec.params) if callspec else {},
            tier=item.config.getoption("tier", None),
            worker=item.config.stash[SESSION].worker,
            started=_now())
    return item.stash[RECORD]


@pytest.fixture
def check_record(request: pytest.FixtureRequest) -> CheckRecord:
    """This check's record: fill in model, engine, outputs, peak_memory,
    timeline_path, log_path, evidence... The plugin sets the verdict."""
    return record_for(request.node)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    # tryfirst makes this the outermost wrapper: it sees the report after
    # pytest's own xfail handling.
    report = yield
    if not _is_check(item):
        return report
    record = record_for(item)
    record.durations.setdefault(call.when, round(report.duration, 3))
    _fold_phase(record, report, call)
    state = item.config.stash[SESSION]
    if record.is_failure:
        _fill_engine(record, state)
        apply_known_issues(record, state.known_issues)
        if record.verdict == Verdict.KNOWN_ISSUE.value and report.failed:
            _as_expected_failure(report, record)
    if call.when == "teardown":
        item.config.hook.pytest_mmharness_record(record=record, item=item)
        _finish(record, state)
    return report


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
    if isinstance(error, CheckFailure):
        record.verdict = Verdict.ERROR.value if call.when == "setup" else Verdict.FAIL.value
        record.cause, record.message = error.cause.value, error.message
        record.divergence = json_safe(error.divergence)
        record.evidence.update(json_safe(error.evidence))
    elif isinstance(error, (AssertionError, pytest.fail.Exception)):
        record.verdict = Verdict.ERROR.value if call.when == "setup" else Verdict.FAIL.value
        record.cause, record.message = Cause.ASSERTION.value, _exception_text(call)
    else:
        record.verdict = Verdict.ERROR.value
        kind = type(error).__name__ if error is not None else "unknown"
        where = "" if call.when == "call" else f" in {call.when}"
        record.cause = DetailedCause(Cause.HARNESS, kind + where).value
        record.message = _exception_text(call)


def _exception_text(call: pytest.CallInfo) -> str:
    if call.excinfo is None:
        return ""
    return call.excinfo.exconly().strip()[:4000]


def _skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr or "")


def _fill_engine(record: CheckRecord, state: _Session) -> None:
    for field in ("engine", "engine_version"):
        if getattr(record, field) is None and isinstance(state.reported.get(field), str):
            setattr(record, field, state.reported[field])


def _as_expected_failure(report: pytest.TestReport, record: CheckRecord) -> None:
    """pytest's own xfail form: counted as xfailed, not failed, by the
    terminal, the exit status and --junitxml."""
    report.outcome = "skipped"
    report.wasxfail = f"known issue: {record.known_issue['link']}"


def _finish(record: CheckRecord, state: _Session) -> None:
    _fill_engine(record, state)
    if record.verdict == Verdict.PASS.value:
        apply_known_issues(record, state.known_issues)  # flags "appears fixed"
    record.verdict = record.verdict or Verdict.ERROR.value
    record.finished = _now()
    try:
        attach(record, state.layout)
    except Exception as exc:  # an extra that failed must not cost the record
        record.evidence.setdefault("harness_notes", []).append(
            f"attachments failed: {type(exc).__name__}: {exc}")
    state.writer.append(record)


def write_check(config: pytest.Config, record: CheckRecord) -> None:
    """Record a check that is no pytest test (an engine's leak check at its
    teardown): the same known-issue handling and attachments as a test's."""
    state = config.stash[SESSION]
    record.worker, record.tier = state.worker, record.tier or config.getoption("tier", None)
    record.started = record.started or _now()
    config.hook.pytest_mmharness_record(record=record, item=None)
    if record.is_failure:
        _fill_engine(record, state)
        apply_known_issues(record, state.known_issues)
    _finish(record, state)


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
        state = self.config.stash[SESSION]
        path = report.nodeid.split("::", 1)[0]
        state.writer.append(CheckRecord(
            id=report.nodeid, family=Path(path).stem.removeprefix("test_"),
            tier=self.config.getoption("tier", None), verdict=Verdict.ERROR.value,
            cause=DetailedCause(Cause.HARNESS, "collection error").value,
            message=str(report.longrepr)[-4000:],
            worker=state.worker, started=_now(), finished=_now()))


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """xdist controller: a worker died inside a check and wrote nothing for
    it. Record that check here, since the dead worker cannot."""
    config = sched.config
    state = config.stash[SESSION]
    path = crashitem.split("::", 1)[0]
    record = CheckRecord(
        id=crashitem, family=Path(path).stem.removeprefix("test_"),
        params={"id": crashitem[crashitem.index("[") + 1:-1]} if crashitem.endswith("]") else {},
        tier=config.getoption("tier", None), verdict=Verdict.ERROR.value, cause=Cause.ENGINE_DEAD.value,
        message=f"the pytest worker died while running this check (an in-process engine crash, "
                f"an OOM kill or a signal): {report.longrepr}",
        worker=state.worker, started=_now(), finished=_now())
    _fill_engine(record, state)
    apply_known_issues(record, state.known_issues)
    if record.verdict == Verdict.KNOWN_ISSUE.value:
        _as_expected_failure(report, record)
    state.writer.append(record)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash[SESSION]
    state.writer.close()
    if _is_worker(config):
        return
    if not state.layout.records_dir.exists() and not state.results_dir_given:
        return  # no check ran: leave no empty run behind
    state.results = finish_run(state, config, int(exitstatus))
    session.exitstatus = exit_status(state.results, int(exitstatus))


def finish_run(state: _Session, config: pytest.Config, exitstatus: int) -> RunResults:
    """Merge, append history, render the report, point `latest` at it."""
    from harness.report.html import render_report

    run = {
        "run_id": state.layout.run_dir.name,
        "command": shlex.join(["pytest", *config.invocation_params.args]),
        "tier": config.getoption("tier", None),
        "started": state.started,
        "finished": _now(),
        "pytest_exit_status": exitstatus,
        **collect_host_metadata(config.rootpath),
        **state.reported,
    }
    results = merge_run(state.layout, run)
    append_history(state.history_path, history_entry(run["run_id"], results))
    history = read_history(state.history_path)
    baseline = load_results(state.baseline_path) if state.baseline_path else None
    render_report(results, state.layout.report_html, baseline=baseline,
                  streaks=failing_since(history.entries, run["run_id"]),
                  history_problems=history.problems)
    _point_latest(state.layout.run_dir)
    return results


def _point_latest(run_dir: Path) -> None:
    """`latest` beside the run dirs: a relative symlink."""
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, latest)


def exit_status(results: RunResults, pytest_status: int) -> int:
    """pytest's status, made non-zero when a record says a check failed or a
    record was lost; known issues and skips never fail the run. A status that
    means the run did not complete (interrupted, usage or internal error) is
    kept as it is."""
    if pytest_status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED,
                             pytest.ExitCode.NO_TESTS_COLLECTED):
        return pytest_status
    if not results.green:
        return pytest.ExitCode.TESTS_FAILED
    return pytest_status


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(SESSION, None)
    if state is None or state.results is None:
        return
    from harness.report.summary import print_run_summary
    print_run_summary(state.results, state.layout.report_html)


# Temporary adapters to the hookspecs, until the records plugin is split out.
def pytest_addhooks(pluginmanager) -> None:
    from harness.plugins import hookspecs
    pluginmanager.add_hookspecs(hookspecs)


def pytest_mmharness_add_record(config, record):
    write_check(config, record)
    return True


def pytest_mmharness_run_metadata(config, fields):
    set_run_metadata(config, **fields)


def pytest_mmharness_run_dir(config):
    return config.stash[SESSION].layout.run_dir
