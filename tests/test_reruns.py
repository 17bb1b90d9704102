"""A failed check run once more (harness/plugins/reruns.py): crafted suites
run by pytester through the harness's plugins, a module-scoped fixture
holding a run as a scenario's does (no engine: tests/test_flaky_verdict.py
runs the real one)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results.record import CheckRecord
from harness.results.run import load_results
from harness.results.status import ExitStatus

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
PLUGINS = ('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", '
           '"harness.plugins.report", "harness.plugins.reruns", "harness.plugins.progress"]\n')

# Each check counts its attempts in a file beside the suite, so that what
# ran twice is told from its own traces, not from the records under test.
SUITE = '''
import json
from pathlib import Path

import pytest
from harness.verdicts import Cause, CheckFailure, Unsupported
from harness.runner.run import EngineUse, Run, Sent

TRACE = Path(__file__).with_name("trace.jsonl")
computed = []


def trace(**event):
    with TRACE.open("a") as f:
        f.write(json.dumps(event) + "\\n")


@pytest.fixture(autouse=True)
def engine(check_record, request):
    check_record.engine, check_record.engine_version = "offline:vllm", "0.9.2"
    trace(check=request.node.name)


@pytest.fixture(scope="module")
def batch():
    """A module-scoped run, as a scenario's batch fixture holds one."""
    computed.append(len(computed) + 1)
    trace(batch=computed[-1])
    return {"n": computed[-1], "run": Run.sent("batch", None, Sent(EngineUse("offline", "batch", None)))}


@pytest.fixture(scope="module")
def settings():
    """A module-scoped value that holds no run: kept for the rerun."""
    trace(settings=1)
    return object()


def test_passes_on_the_first_run(batch, settings):
    pass


def test_fails_on_the_first_run_only(batch, settings):
    if batch["n"] == 1:
        raise CheckFailure(Cause.MISMATCH, f"clip0: position 3 differs on run {batch['n']}")


def test_reads_the_rerun(batch):
    assert batch["n"] == 2


def test_fails_every_time():
    raise CheckFailure(Cause.MISMATCH, "clip1: position 5 differs")


ATTEMPTS = []


def test_fails_for_another_cause_the_second_time():
    ATTEMPTS.append(1)
    cause = Cause.MISMATCH if len(ATTEMPTS) == 1 else Cause.PREMISE
    raise CheckFailure(cause, f"attempt {len(ATTEMPTS)}")


def test_harness_bug():
    {}["missing"]


def test_known(batch):
    raise CheckFailure(Cause.OOM, "ran out of memory")


def test_unsupported():
    raise Unsupported("X does not support LoRA yet.")


def test_skipped():
    pytest.skip("needs a GPU")
'''

REGISTRY = '''
[[issue]]
check = "test_suite.py::test_known"
engine = "vllm"
engine_versions = ">=0.9,<0.10"
cause = "oom"
link = "https://example.invalid/vllm/issues/7"
reason = "known"
'''


def _run(pytester, *args):
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_suite=SUITE)
    registry = pytester.path / "known_issues.toml"
    registry.write_text(REGISTRY)
    run_dir = pytester.path / "run"
    result = pytester.runpytest(f"--results-dir={run_dir}", f"--history={pytester.path / 'history.jsonl'}",
                                f"--known-issues={registry}", "-p", "no:cacheprovider", *args)
    return result, run_dir


def _traces(pytester) -> list[dict]:
    return [json.loads(line) for line in (pytester.path / "trace.jsonl").read_text().splitlines()]


def _records(run_dir: Path) -> dict[str, CheckRecord]:
    return {r.id.split("::", 1)[1]: r for r in load_results(run_dir).records}


def test_a_failure_that_does_not_come_back_is_flaky_and_one_that_does_is_confirmed(pytester):
    result, run_dir = _run(pytester, "--reruns", "1")
    records = _records(run_dir)
    verdicts = {name: (r.verdict, r.cause) for name, r in records.items()}
    assert verdicts == {
        "test_passes_on_the_first_run": ("pass", None),
        "test_fails_on_the_first_run_only": ("flaky", "mismatch"),
        "test_reads_the_rerun": ("pass", None),
        "test_fails_every_time": ("fail", "mismatch"),
        "test_fails_for_another_cause_the_second_time": ("fail", "mismatch"),
        "test_harness_bug": ("error", "harness: KeyError"),
        "test_known": ("known issue", "oom"),
        "test_unsupported": ("unsupported", "not-supported: X does not support LoRA yet."),
        "test_skipped": ("skip", None),
    }
    flaky = records["test_fails_on_the_first_run_only"]
    assert flaky.message == "clip0: position 3 differs on run 1"  # the first attempt's failure, kept
    first, rerun = flaky.attempts
    assert (first["verdict"], first["cause"], first["message"]) == ("fail", "mismatch", flaky.message)
    assert (rerun["verdict"], rerun["outcome"]) == ("pass", "passed: flaky") and "cause" not in rerun
    assert set(flaky.durations) == {"setup", "call", "teardown", "rerun"}
    confirmed = records["test_fails_every_time"].attempts
    assert [(a["verdict"], a["cause"]) for a in confirmed] == [("fail", "mismatch")] * 2
    assert confirmed[1]["outcome"] == "the same cause: confirmed"
    other = records["test_fails_for_another_cause_the_second_time"]
    assert (other.message, other.attempts[1]["cause"]) == ("attempt 1", "premise")
    assert other.attempts[1]["outcome"] == "another cause (premise): the failure stands"
    # Ran once: what passed, and what a rerun cannot tell.
    for name in ("test_passes_on_the_first_run", "test_reads_the_rerun", "test_harness_bug", "test_known",
                 "test_unsupported", "test_skipped"):
        assert records[name].attempts is None, name

    traces = _traces(pytester)
    checks = [t["check"] for t in traces if "check" in t]
    assert checks.count("test_fails_on_the_first_run_only") == 2 and checks.count("test_fails_every_time") == 2
    for name in ("test_passes_on_the_first_run", "test_reads_the_rerun", "test_harness_bug", "test_known",
                 "test_unsupported", "test_skipped"):
        assert checks.count(name) == 1, name
    # The run's fixture was computed again for the rerun, the one without a run was not.
    assert [t["batch"] for t in traces if "batch" in t] == [1, 2]
    assert [t for t in traces if "settings" in t] == [{"settings": 1}]
    again = traces.index({"batch": 2})  # at the rerun's setup, between its two attempts
    assert traces[again - 1] == traces[again + 1] == {"check": "test_fails_on_the_first_run_only"}

    # pytest sees one outcome per check, the last attempt's.
    result.assert_outcomes(passed=3, failed=3, skipped=2, xfailed=1)
    assert result.ret == ExitStatus.HARNESS_ERROR  # the harness bug outranks everything


def test_flaky_alone_exits_7_and_says_so_everywhere(pytester):
    result, run_dir = _run(pytester, "--reruns", "1", "-k", "passes_on_the_first or first_run_only or reads_the")
    assert result.ret == ExitStatus.FLAKY
    result.stdout.fnmatch_lines([
        "mmharness: FLAKY: 1 flaky, 2 pass (3 checks)",
        "mmharness: flaky: test_suite.py::test_fails_on_the_first_run_only: mismatch "
        "(clip0: position 3 differs on run 1), then passed on fresh engines",
        "mmharness: report: *report.html",
        "mmharness: exit status 7 (flaky checks: failures that did not come back on a rerun)",
    ])
    history = [json.loads(line) for line in (pytester.path / "history.jsonl").read_text().splitlines()]
    assert history[0]["flaky"] == {"test_suite.py::test_fails_on_the_first_run_only": "mismatch"}
    page = (run_dir / "report.html").read_text()
    section = page[page.index('<section id="flaky">'):page.index("</section>", page.index('<section id="flaky">'))]
    assert "clip0: position 3 differs on run 1" in section and "passed: flaky" in section
    assert "flaky in 1 of the 1 runs of this tier that ran it" in section


def test_with_findings_beside_it_a_flaky_run_exits_1(pytester):
    result, _ = _run(pytester, "--reruns", "1", "-k", "first_run_only or every_time")
    assert result.ret == ExitStatus.FINDINGS


def test_no_rerun_without_the_option(pytester):
    result, run_dir = _run(pytester, "-k", "first_run_only or every_time")
    records = _records(run_dir)
    assert {n: r.verdict for n, r in records.items()} == {"test_fails_on_the_first_run_only": "fail",
                                                         "test_fails_every_time": "fail"}
    assert all(r.attempts is None for r in records.values())
    assert [t["batch"] for t in _traces(pytester) if "batch" in t] == [1]
    assert result.ret == ExitStatus.FINDINGS


def test_a_failed_setup_of_a_module_fixture_is_computed_again(pytester):
    """pytest keeps a module fixture's error and raises it again for the
    next check: the rerun must compute it afresh."""
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_setup='''
import pytest
from harness.verdicts import Cause, CheckFailure

computed = []

@pytest.fixture(scope="module")
def engine_premise():
    computed.append(1)
    if len(computed) == 1:
        raise CheckFailure(Cause.PREMISE, "the batch was not served in one step")

def test_invariance(engine_premise, check_record):
    pass
''')
    run_dir = pytester.path / "run"
    result = pytester.runpytest(f"--results-dir={run_dir}", f"--history={pytester.path / 'h.jsonl'}", "--reruns=1")
    [record] = load_results(run_dir).records
    assert (record.verdict, record.cause) == ("flaky", "premise")
    assert record.attempts[0]["verdict"] == "error"  # a setup failure
    assert result.ret == ExitStatus.FLAKY


def test_the_rerun_runs_on_the_xdist_worker_that_ran_the_check(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's harness, not the venv's
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_suite=SUITE)
    run_dir = pytester.path / "run"
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "xdist", "-n", "2", "--dist", "loadscope",
                          "--reruns", "1", "-k", "passes_on_the_first or first_run_only or reads_the or every_time",
                          f"--results-dir={run_dir}", f"--history={pytester.path / 'h.jsonl'}",
                          "-p", "no:cacheprovider", timeout=120)
    records = _records(run_dir)
    assert {n: r.verdict for n, r in records.items()} == {
        "test_passes_on_the_first_run": "pass", "test_fails_on_the_first_run_only": "flaky",
        "test_reads_the_rerun": "pass", "test_fails_every_time": "fail"}
    flaky = records["test_fails_on_the_first_run_only"]
    assert flaky.worker.startswith("gw") and flaky.worker == records["test_reads_the_rerun"].worker
    assert [t["batch"] for t in _traces(pytester) if "batch" in t] == [1, 2]
    result.stderr.fnmatch_lines(["*mmharness: gw?: test_fails_every_time failed (mismatch): "
                                 "running it again on fresh engines*"])
    assert result.ret == ExitStatus.FINDINGS


def test_a_rerun_cut_short_keeps_the_first_attempts_failure(pytester, monkeypatch):
    """Ctrl-C during the rerun: the first attempt's failure is written as
    it stands, and the run is interrupted."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_interrupted='''
import os
import signal

from harness.verdicts import Cause, CheckFailure

ATTEMPTS = []

def test_then_ctrl_c(check_record):
    ATTEMPTS.append(1)
    if len(ATTEMPTS) == 1:
        raise CheckFailure(Cause.MISMATCH, "clip2 differs")
    os.kill(os.getpid(), signal.SIGINT)
''')
    run_dir = pytester.path / "run"
    done = subprocess.run([sys.executable, "-m", "pytest", f"--results-dir={run_dir}", "--reruns=1",
                           f"--history={pytester.path / 'h.jsonl'}", "-p", "no:cacheprovider"],
                          cwd=pytester.path, capture_output=True, text=True, timeout=120,
                          # SIGINT as a terminal gives it, even under a `&` job that ignores it.
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == ExitStatus.INTERRUPTED, done.stdout + done.stderr
    [record] = load_results(run_dir).records
    assert (record.verdict, record.cause, record.message) == ("fail", "mismatch", "clip2 differs")
    assert record.attempts[1] == {"outcome": "did not run to its end: the run was interrupted"}
