"""pytest plugin: the run as a whole. Where it lives, and what its end
leaves behind: results.json (merged from every worker's records), one
history line, the `latest` pointer, and the exit status. The report is
drawn by whichever plugin implements `pytest_mmharness_run_finished`.

The run directory is --results-dir or `<rootdir>/reports/run-<UTC time>`;
under xdist every worker writes into the controller's. `latest` beside it
is a symlink to the newest run, and --history (`<rootdir>/reports/
history.jsonl`) gets one line per run (a shard's is added by `report
merge`: plugins/shard.py). A session with no check leaves no run
directory behind.

A run that did not go to its end (Ctrl-C, `-x`, `pytest.exit`) is marked
incomplete in results.json and the history line, and never exits 0. A run
killed outright writes no results.json at all; `python -m harness report
render` marks it incomplete when it merges its records afterwards.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shlex
from pathlib import Path

import pytest

from harness.verdicts import Verdict
from harness.plugins.common import history_path, is_worker, now
from harness.results.history import append_history, history_entry, passed_last_time, read_history
from harness.results.merge import merge_run
from harness.results.metadata import collect_host_metadata
from harness.results.run import RunResults
from harness.results.status import ExitStatus, describe, run_status
from harness.results.store import RunLayout

WORKERINPUT_RUN_DIR = "mmharness_run_dir"
WORKERINPUT_STARTED = "mmharness_started"


@dataclasses.dataclass
class _Run:
    """This plugin's one state."""
    layout: RunLayout
    worker: str  # "main", or the xdist worker's id
    started: str
    results_dir_given: bool
    # Why the session ended early, as pytest told it (pytest_keyboard_interrupt).
    interrupted: str | None = None
    # The run's exit status (harness.results.status), once its end is written.
    status: int | None = None
    # Checks now unsupported that passed in the tier's previous run: findings.
    went_unsupported: list[str] = dataclasses.field(default_factory=list)


RUN = pytest.StashKey[_Run]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness")
    g.addoption("--results-dir", default=None,
                help="directory for this run's records, results.json and report "
                     "(default: reports/run-<time>)")
    g.addoption("--history", default=None,
                help="append-only run history (default: reports/history.jsonl at the repo root)")


def _run(config: pytest.Config) -> _Run:
    """Decided on first use, so that any plugin's pytest_configure may ask."""
    if RUN not in config.stash:
        workerinput = getattr(config, "workerinput", None)
        given = config.getoption("results_dir", None)
        if workerinput is not None:
            run_dir = Path(workerinput[WORKERINPUT_RUN_DIR])
            worker, started = workerinput["workerid"], workerinput[WORKERINPUT_STARTED]
        else:
            stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            run_dir = Path(given) if given else config.rootpath / "reports" / f"run-{stamp}"
            worker, started = "main", now()
        config.stash[RUN] = _Run(RunLayout(run_dir.resolve()), worker, started, bool(given))
    return config.stash[RUN]


def run_layout(config: pytest.Config) -> RunLayout:
    """Where this run's records, logs and report go (the same on every worker)."""
    return _run(config).layout


def pytest_mmharness_run_dir(config: pytest.Config) -> Path:
    return run_layout(config).run_dir


def pytest_configure(config: pytest.Config) -> None:
    _run(config)
    config.pluginmanager.register(_InterruptWatch(config), "mmharness-interrupt-watch")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: every worker writes into the controller's run dir."""
    run = _run(node.config)
    node.workerinput[WORKERINPUT_RUN_DIR] = str(run.layout.run_dir)
    node.workerinput[WORKERINPUT_STARTED] = run.started


class _InterruptWatch:
    """Keeps why the session was cut short: pytest_keyboard_interrupt gets
    no config to keep it in."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        error = excinfo.value
        if isinstance(error, pytest.Session.Interrupted):  # session.shouldstop
            reason = f"stopped early: {error}"
        elif isinstance(error, KeyboardInterrupt):
            reason = "interrupted (Ctrl-C / SIGINT)"
        else:
            reason = f"stopped by pytest.exit: {getattr(error, 'msg', error)}"
        _run(self.config).interrupted = reason


def _incomplete_reason(session: pytest.Session) -> str | None:
    """Why this run did not go to its end, or None when it did."""
    reason = _run(session.config).interrupted
    if reason is None and session.shouldfail:  # -x / --maxfail: no hook says so
        reason = f"stopped early: {session.shouldfail}"
    if reason is None and session.shouldstop:
        reason = f"stopped early: {session.shouldstop}"
    return reason


# trylast: after pytest's own sessionfinish, which tears down what is still
# set up after an interrupt (engines, whose teardown checks leave records).
@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if is_worker(config):
        return
    run = _run(config)
    if config.option.collectonly:
        return  # checks listed, none run: no run to record
    if not run.layout.records_dir.exists() and (not run.results_dir_given or exitstatus == ExitStatus.USAGE):
        return  # no check ran: leave no empty run behind
    reason = _incomplete_reason(session)
    history = read_history(history_path(config)).entries  # before this run's line joins it
    results = finish_run(config, run, int(exitstatus), reason)
    unsupported = {r.id for r in results.records if r.verdict == Verdict.UNSUPPORTED.value}
    passed_before = passed_last_time(history, results.run.get("tier"), unsupported)
    run.went_unsupported = sorted(passed_before)
    session.exitstatus = run.status = run_status(results, int(exitstatus), passed_before)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    run = config.stash.get(RUN, None)
    if run is None:
        return
    for check in run.went_unsupported:
        terminalreporter.write_line(f"mmharness: {check} passed in the previous run and is now unsupported")
    # Its `exitstatus` argument is pytest's, from before pytest_sessionfinish set the run's.
    if run.status is not None:
        terminalreporter.write_line(f"mmharness: exit status {describe(run.status)}")


def finish_run(config: pytest.Config, run: _Run, exitstatus: int, incomplete: str | None) -> RunResults:
    """Merge, append history, have the report drawn, point `latest` at it."""
    metadata = {
        "run_id": run.layout.run_dir.name,
        "command": shlex.join(["pytest", *config.invocation_params.args]),
        "tier": config.getoption("tier", None),
        "started": run.started,
        "finished": now(),
        "pytest_exit_status": exitstatus,
        **collect_host_metadata(config.rootpath),
    }
    results = merge_run(run.layout, metadata, incomplete=incomplete)
    if not results.run.get("shard"):  # a shard's line is added by `report merge` (plugins/shard.py)
        append_history(history_path(config), history_entry(metadata["run_id"], results))
    config.hook.pytest_mmharness_run_finished(config=config, results=results, layout=run.layout)
    _point_latest(run.layout.run_dir)
    return results


def _point_latest(run_dir: Path) -> None:
    """`latest` beside the run dirs: a relative symlink."""
    latest = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, latest)
