"""pytest plugin: what people read at the end of a run. The HTML report,
drawn from the merged results (`pytest_mmharness_run_finished`), diffed
against --baseline, with each failure's streak and each flaky check's
count from the run history; then the run's one-line summary, each flaky
check, and the report's path in pytest's terminal summary."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.plugins.common import history_path
from harness.report.html import render_report
from harness.report.summary import summary_lines
from harness.results.history import failing_since, flaky_counts, read_history
from harness.results.run import ResultsError, RunResults, load_results
from harness.results.store import RunLayout


@dataclasses.dataclass
class _Reporting:
    """This plugin's one state: the baseline to diff against, and what was drawn."""
    baseline: Path | None = None
    results: RunResults | None = None
    report: Path | None = None


REPORTING = pytest.StashKey[_Reporting]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness").addoption(
        "--baseline", default=None,
        help="results.json (or run directory) of an earlier run to diff against in the report")


def pytest_configure(config: pytest.Config) -> None:
    state = config.stash[REPORTING] = _Reporting()
    given = config.getoption("baseline", None)
    if not given:
        return
    # Found wanting now rather than after a night of checks.
    try:
        state.baseline = load_results(Path(given)).path
    except ResultsError as exc:
        raise pytest.UsageError(f"--baseline: {exc}") from exc


def pytest_mmharness_run_finished(config: pytest.Config, results: RunResults, layout: RunLayout) -> None:
    state = config.stash[REPORTING]
    baseline = state.baseline
    history = read_history(history_path(config))
    run_id = results.run.get("run_id", layout.run_dir.name)
    render_report(results, layout.report_html,
                  baseline=load_results(baseline) if baseline else None,
                  streaks=failing_since(history.entries, run_id),
                  flaky=flaky_counts(history.entries, run_id),
                  history_problems=history.problems)
    state.results, state.report = results, layout.report_html


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(REPORTING, None)
    if state is None or state.results is None:
        return
    for line in summary_lines(state.results, state.report):
        terminalreporter.write_line(line)
