"""Exit statuses a pipeline can act on (harness/results/status.py): one per
class of outcome, the same from the run plugin and the command line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.status import ExitStatus, run_status
from harness.results.store import write_results_atomic

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
DONE = {"complete": True}


def _results(*records: CheckRecord, run: dict = DONE, problems: list[str] | None = None) -> RunResults:
    return RunResults(run=run, records=list(records), problems=problems or [])


PASS = CheckRecord(id="a", verdict="pass")
ENGINE_FAIL = CheckRecord(id="b", verdict="fail", cause="mismatch")
HARNESS_BUG = CheckRecord(id="c", verdict="error", cause="harness: KeyError")
KNOWN = CheckRecord(id="d", verdict="known issue", cause="oom")
FLAKY = CheckRecord(id="f", verdict="flaky", cause="mismatch",
                    attempts=[{"verdict": "fail", "cause": "mismatch"}, {"verdict": "pass", "outcome": "passed: flaky"}])


@pytest.mark.parametrize("results, pytest_status, expected", [
    (_results(PASS, KNOWN), ExitStatus.OK, ExitStatus.OK),  # a known issue is nothing new
    (_results(PASS, ENGINE_FAIL), ExitStatus.FINDINGS, ExitStatus.FINDINGS),
    (_results(PASS, ENGINE_FAIL), ExitStatus.OK, ExitStatus.FINDINGS),  # the record decides
    (_results(ENGINE_FAIL, HARNESS_BUG), ExitStatus.FINDINGS, ExitStatus.HARNESS_ERROR),
    (_results(PASS, problems=["gw0.jsonl:4: unfinished record"]), ExitStatus.OK, ExitStatus.HARNESS_ERROR),
    (_results(PASS), ExitStatus.INTERRUPTED, ExitStatus.INTERRUPTED),
    (_results(PASS, ENGINE_FAIL), ExitStatus.INTERRUPTED, ExitStatus.INTERRUPTED),  # Ctrl-C wins
    (_results(PASS, run={"complete": False}), ExitStatus.OK, ExitStatus.INTERRUPTED),
    (_results(ENGINE_FAIL, run={"complete": False}), ExitStatus.FINDINGS, ExitStatus.FINDINGS),  # -x
    (_results(), ExitStatus.USAGE, ExitStatus.USAGE),
    (_results(PASS), pytest.ExitCode.INTERNAL_ERROR, ExitStatus.HARNESS_ERROR),
    (_results(), ExitStatus.NOTHING_SELECTED, ExitStatus.NOTHING_SELECTED),
    # Flaky: its own status, below findings, harness errors and an incomplete run.
    (_results(PASS, FLAKY, KNOWN), ExitStatus.OK, ExitStatus.FLAKY),
    (_results(FLAKY, ENGINE_FAIL), ExitStatus.FINDINGS, ExitStatus.FINDINGS),
    (_results(FLAKY, HARNESS_BUG), ExitStatus.FINDINGS, ExitStatus.HARNESS_ERROR),
    (_results(FLAKY, run={"complete": False}), ExitStatus.OK, ExitStatus.INTERRUPTED),
    (_results(FLAKY), ExitStatus.INTERRUPTED, ExitStatus.INTERRUPTED),
])
def test_each_outcome_has_its_status(results, pytest_status, expected):
    assert run_status(results, pytest_status) == expected


def test_a_rerun_that_broke_in_the_harness_is_a_harness_error():
    """The first attempt's engine failure stands, but the rerun raised in
    the harness's own code: that is the harness's to fix."""
    broken_rerun = CheckRecord(id="g", verdict="fail", cause="mismatch", attempts=[
        {"verdict": "fail", "cause": "mismatch"}, {"verdict": "error", "cause": "harness: KeyError in setup"}])
    assert run_status(_results(PASS, broken_rerun), ExitStatus.FINDINGS) == ExitStatus.HARNESS_ERROR


def test_unsupported_is_a_finding_only_where_the_check_passed_last_time():
    went = CheckRecord(id="e", verdict="unsupported", cause="not-supported: X does not support LoRA yet.")
    assert run_status(_results(PASS, went), ExitStatus.OK) == ExitStatus.OK
    assert run_status(_results(PASS, went), ExitStatus.OK, passed_before={"a"}) == ExitStatus.OK
    assert run_status(_results(PASS, went), ExitStatus.OK, passed_before={"e"}) == ExitStatus.FINDINGS


def test_a_run_says_which_check_went_unsupported_after_passing(pytester, monkeypatch):
    """End to end: two runs through the plugins sharing a history; the check
    passes, then the engine refuses it: status 1, and the line names it."""
    pytester.makeconftest('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", '
                          '"harness.plugins.report"]\n')
    pytester.makepyfile(test_suite=(
        "import os\nfrom harness.verdicts import Unsupported\n"
        "def test_feature(check_record):\n"
        "    if os.environ.get('GONE'):\n        raise Unsupported('X does not support LoRA yet.')\n"))
    history = pytester.path / "h.jsonl"
    first = pytester.runpytest(f"--results-dir={pytester.path / 'r1'}", f"--history={history}")
    assert first.ret == ExitStatus.OK
    monkeypatch.setenv("GONE", "1")
    second = pytester.runpytest(f"--results-dir={pytester.path / 'r2'}", f"--history={history}")
    assert second.ret == ExitStatus.FINDINGS
    second.stdout.fnmatch_lines(["*test_feature passed in the previous run and is now unsupported*",
                                 "mmharness: exit status 1 (new engine findings)"])


def test_the_statuses_keep_pytests_meanings():
    assert [int(ExitStatus[name]) for name in ("OK", "FINDINGS", "INTERRUPTED", "HARNESS_ERROR", "USAGE",
                                               "NOTHING_SELECTED")] == \
        [int(pytest.ExitCode[name]) for name in ("OK", "TESTS_FAILED", "INTERRUPTED", "INTERNAL_ERROR",
                                                 "USAGE_ERROR", "NO_TESTS_COLLECTED")]
    # Flaky is none of pytest's: pytest-rerunfailures' --fail-on-flaky status.
    assert ExitStatus.FLAKY == 7 and ExitStatus.FLAKY not in {int(code) for code in pytest.ExitCode}


def test_a_run_ends_with_its_status_in_words(pytester):
    pytester.makeconftest('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", '
                          '"harness.plugins.report"]\n')
    pytester.makepyfile(test_suite="def test_bug(check_record):\n    {}['missing']\n")
    result = pytester.runpytest(f"--results-dir={pytester.path / 'run'}", f"--history={pytester.path / 'h'}")
    assert result.ret == ExitStatus.HARNESS_ERROR
    result.stdout.fnmatch_lines(["mmharness: exit status 3 (harness error)"])


def _write(path: Path, *records: CheckRecord) -> Path:
    write_results_atomic(path / "results.json", _results(*records).to_json())
    return path


def test_diff_says_which_kind_of_failure_is_new(tmp_path):
    old = _write(tmp_path / "old", PASS, ENGINE_FAIL)
    assert main(["report", "diff", str(old), str(old)]) == ExitStatus.OK  # still failing is not new
    assert main(["report", "diff", str(old), str(_write(tmp_path / "bug", PASS, ENGINE_FAIL, HARNESS_BUG))]) \
        == ExitStatus.HARNESS_ERROR


def test_a_crash_of_the_command_line_is_a_harness_error(tmp_path, monkeypatch, capsys):
    import harness.__main__ as cli

    monkeypatch.setitem(cli.COMMANDS, "summary", lambda args: {}["missing"])
    assert main(["report", "summary", str(tmp_path)]) == ExitStatus.HARNESS_ERROR  # not 1, findings
    assert "KeyError" in capsys.readouterr().err


def test_a_bad_command_line_is_a_usage_error_not_an_interrupted_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness", "report", "diff", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitStatus.USAGE, done.stderr
    assert "the following arguments are required: new" in done.stderr
