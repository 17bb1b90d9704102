"""The pytest plugin end to end: crafted suites run by pytester (in process,
or as a real subprocess where a kill or xdist workers are involved)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.results.record import CheckRecord
from harness.results.run import RunResults, load_results
from harness.results.status import ExitStatus

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
# With the progress plugin, so that xdist runs show it does not break them.
PLUGINS = ('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", '
           '"harness.plugins.report", "harness.plugins.progress"]\n')

SUITE = '''
import pytest
from harness.verdicts import Cause, CheckFailure


@pytest.fixture
def engine(check_record, pytestconfig):
    check_record.engine, check_record.engine_version = "offline:vllm", "0.9.2"
    pytestconfig.hook.pytest_mmharness_run_metadata(
        config=pytestconfig, fields={"engine": "vllm", "engine_version": "0.9.2", "device": "cpu"})


@pytest.fixture
def leaky(check_record):
    yield
    raise CheckFailure(Cause.LEAK, "3 engine processes survived")


@pytest.fixture
def engine_that_never_starts():
    raise CheckFailure(Cause.STARTUP_FAILED, "engine exited during load")


def test_pass(engine, check_record):
    check_record.model = "tiny-llava"
    check_record.outputs = "<script>alert(1)</script>"


def test_oom(engine):
    raise CheckFailure(Cause.OOM, "ran out at 12 GiB", divergence={"position": 3},
                       evidence={"peak_gib": 12})


def test_plain_assert(engine):
    assert 1 == 2, "one is not two"


def test_harness_bug(engine):
    {}["missing"]


def test_skipped(engine):
    pytest.skip("needs a GPU")


@pytest.mark.parametrize("size", [1, 2])
def test_sizes(engine, size):
    pass


def test_startup(engine_that_never_starts, check_record):
    pass


def test_leak_found_in_teardown(engine, leaky):
    pass


@pytest.mark.xfail(reason="tracked upstream")
def test_marked_xfail(engine):
    assert False


def test_not_a_check():
    pass
'''


def _run(pytester, *args):
    pytester.makeconftest(PLUGINS)
    run_dir = pytester.path / "run"
    result = pytester.runpytest(f"--results-dir={run_dir}",
                                f"--history={pytester.path / 'history.jsonl'}", *args)
    return result, run_dir


def _by_name(results: RunResults) -> dict[str, CheckRecord]:
    return {r.id.split("::", 1)[1]: r for r in results.records}


def test_verdicts_causes_and_records(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result, run_dir = _run(pytester)
    records = _by_name(load_results(run_dir))

    assert set(records) == {"test_pass", "test_oom", "test_plain_assert", "test_harness_bug",
                            "test_skipped", "test_sizes[1]", "test_sizes[2]", "test_startup",
                            "test_leak_found_in_teardown", "test_marked_xfail"}  # not test_not_a_check
    verdicts = {name: (r.verdict, r.cause) for name, r in records.items()}
    assert verdicts == {
        "test_pass": ("pass", None),
        "test_oom": ("fail", "oom"),
        "test_plain_assert": ("fail", "assertion"),
        "test_harness_bug": ("error", "harness: KeyError"),
        "test_skipped": ("skip", None),
        "test_sizes[1]": ("pass", None),
        "test_sizes[2]": ("pass", None),
        "test_startup": ("error", "startup-failed"),
        "test_leak_found_in_teardown": ("fail", "leak"),
        "test_marked_xfail": ("known issue", None),
    }
    assert records["test_marked_xfail"].known_issue == {"check": "pytest xfail marker",
                                                        "reason": "tracked upstream"}
    oom = records["test_oom"]
    assert (oom.message, oom.divergence, oom.evidence) == ("ran out at 12 GiB", {"position": 3},
                                                           {"peak_gib": 12})
    assert "one is not two" in records["test_plain_assert"].message
    assert records["test_skipped"].message == "needs a GPU"
    assert records["test_sizes[2]"].params == {"size": 2}
    assert records["test_pass"].family == "suite"
    assert records["test_pass"].model == "tiny-llava"
    assert records["test_pass"].engine_version == "0.9.2"
    assert set(records["test_pass"].durations) == {"setup", "call", "teardown"}

    results = load_results(run_dir)
    assert results.run["engine_version"] == "0.9.2" and results.run["device"] == "cpu"
    assert results.run["command"].startswith("pytest --results-dir=")
    assert results.run["python"] and results.run["cpu_model"] and results.run["finished"]
    assert result.ret == ExitStatus.HARNESS_ERROR  # test_harness_bug outranks the engine's failures
    assert (run_dir / "report.html").exists()
    assert os.readlink(run_dir.parent / "latest") == "run"
    history = [json.loads(line) for line in (pytester.path / "history.jsonl").read_text().splitlines()]
    assert [h["run_id"] for h in history] == ["run"]
    assert history[0]["not_passing"]["test_suite.py::test_oom"] == "fail"
    result.stdout.fnmatch_lines([
        "mmharness: FAILED: 3 fail, 2 error, 1 known issue, 1 skip, 3 pass (10 checks)",
        f"mmharness: report: {run_dir / 'report.html'}",
    ])


def test_every_test_under_scenarios_is_a_check(pytester):
    pytester.mkdir("scenarios")
    pytester.makepyfile(**{"scenarios/test_family": "def test_plain():\n    pass\n"})
    result, run_dir = _run(pytester)
    [record] = load_results(run_dir).records
    assert (record.id, record.family, record.verdict) == (
        "scenarios/test_family.py::test_plain", "family", "pass")
    assert result.ret == pytest.ExitCode.OK


def test_scenario_module_that_cannot_be_collected_leaves_a_record(pytester):
    pytester.mkdir("scenarios")
    pytester.makepyfile(**{"scenarios/test_broken": "import no_such_module\n",
                           "scenarios/test_fine": "def test_ok():\n    pass\n"})
    result, run_dir = _run(pytester, "--continue-on-collection-errors")
    records = {r.id: r for r in load_results(run_dir).records}
    broken = records["scenarios/test_broken.py"]
    assert (broken.verdict, broken.cause, broken.family) == ("error", "harness: collection error", "broken")
    assert "No module named 'no_such_module'" in broken.message
    assert records["scenarios/test_fine.py::test_ok"].verdict == "pass"
    assert result.ret == ExitStatus.HARNESS_ERROR


def test_session_without_checks_leaves_no_run_behind(pytester):
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_unit="def test_unit():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "reports").exists()


REGISTRY = '''
[[issue]]
check = "test_suite.py::test_oom"
engine = "vllm"
engine_versions = ">=0.9,<0.10"
cause = "oom"
link = "https://example.invalid/vllm/issues/7"
reason = "the vision encoder's workspace is not counted in the budget"

[[issue]]
check = "test_suite.py::test_sizes[*]"
engine_versions = ">=0.9,<0.10"
cause = "mismatch"
message = "input 2: *"
link = "https://example.invalid/vllm/issues/8"
reason = "size 2 batches drift"
'''


def test_known_issues_do_not_fail_the_run(pytester):
    only_known = SUITE.split("def test_plain_assert")[0]  # pass, oom, engine fixtures
    pytester.makepyfile(test_suite=only_known + "\n@pytest.mark.parametrize('size', [1])\n"
                        "def test_sizes(engine, size):\n    pass\n")
    registry = pytester.path / "known_issues.toml"
    registry.write_text(REGISTRY)
    junit = pytester.path / "junit.xml"
    result, run_dir = _run(pytester, f"--known-issues={registry}", f"--junitxml={junit}")

    records = _by_name(load_results(run_dir))
    assert records["test_oom"].verdict == "known issue"
    assert records["test_oom"].known_issue["link"] == "https://example.invalid/vllm/issues/7"
    assert records["test_sizes[1]"].known_issue_fixed["link"] == "https://example.invalid/vllm/issues/8"
    result.assert_outcomes(passed=2, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert 'message="known issue: https://example.invalid/vllm/issues/7"' in junit.read_text()
    result.stdout.fnmatch_lines(["mmharness: nothing new from the engine: 1 known issue, 2 pass (3 checks)"])


@pytest.mark.parametrize("option, message", [
    ("--known-issues={path}/missing.toml", "--known-issues: *missing.toml: cannot read the known-issues registry*"),
    ("--known-issues={path}/bad.toml", "--known-issues: *bad.toml: *#1 is missing link*"),
    ("--baseline={path}/none/results.json", "--baseline: *none/results.json: no such results file*"),
])
def test_bad_registry_or_baseline_stops_the_run_before_it_starts(pytester, option, message):
    (pytester.path / "bad.toml").write_text('[[issue]]\ncheck = "x"\nengine_versions = ">=1"\n'
                                            'cause = "oom"\nreason = "r"\n')
    pytester.makepyfile(test_suite=SUITE)
    result, run_dir = _run(pytester, option.format(path=pytester.path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert not run_dir.exists()


def test_results_json_of_an_older_harness_is_complete_if_it_finished():
    """Runs merged before `complete` existed: the plugin wrote `finished`,
    a render of a killed run did not."""
    assert RunResults(run={"finished": "2026-01-02T03:00:00+00:00"}, records=[]).complete
    killed = RunResults(run={"merged": "2026-01-02T03:00:00+00:00"}, records=[CheckRecord(id="a")])
    assert killed.incompleteness == "did not finish: 1 checks recorded"


def _subprocess_env():
    return {**os.environ, "PYTHONPATH": str(REPO)}


XDIST_SUITE = '''
import os
import pytest

@pytest.mark.parametrize("i", range(4))
def test_spread(check_record, pytestconfig, i):
    pytestconfig.hook.pytest_mmharness_run_metadata(
        config=pytestconfig, fields={"engine": "vllm", "engine_version": "0.9.2"})

def test_worker_dies(check_record):
    os.kill(os.getpid(), 9)  # as an in-process engine crash takes its worker down
'''


def test_xdist_workers_share_the_run_and_a_dead_worker_still_leaves_a_record(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's harness, not the venv's
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_suite=XDIST_SUITE)
    run_dir = pytester.path / "run"
    result = pytester.run(sys.executable, "-m", "pytest", "-p", "xdist", "-n", "2",
                          f"--results-dir={run_dir}", f"--history={pytester.path / 'h.jsonl'}",
                          "-p", "no:cacheprovider", timeout=120)
    results = load_results(run_dir)
    records = _by_name(results)
    assert {name for name, r in records.items() if r.verdict == "pass"} == {
        f"test_spread[{i}]" for i in range(4)}
    dead = records["test_worker_dies"]
    assert (dead.verdict, dead.cause) == ("error", "engine-dead")
    assert "worker died" in dead.message
    workers = {p.stem for p in (run_dir / "records").glob("*.jsonl")}
    assert {"gw0", "gw1"} & workers and "main" in workers  # the controller wrote the dead one's
    assert results.run["engine_version"] == "0.9.2"
    assert result.ret == pytest.ExitCode.TESTS_FAILED


KILLED_SUITE = '''
import time

def test_one(check_record):
    pass

def test_two(check_record):
    check_record.outputs = "done"

def test_hangs(check_record):
    time.sleep(600)
'''


def test_killed_run_keeps_its_records_and_renders_afterwards(pytester):
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_suite=KILLED_SUITE)
    run_dir = pytester.path / "run"
    records = run_dir / "records" / "main.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", f"--results-dir={run_dir}",
                             "-p", "no:cacheprovider", "-q"], cwd=pytester.path,
                            env=_subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and records.read_text().count("\n") == 2:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run never wrote its first two records")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert not (run_dir / "results.json").exists()  # killed before the end

    history = pytester.path / "h.jsonl"
    render = subprocess.run([sys.executable, "-m", "harness", "report", "render", str(run_dir),
                             "--history", str(history), "--append-history"],
                            cwd=REPO, env=_subprocess_env(), capture_output=True, text=True, timeout=60)
    assert render.returncode == ExitStatus.INTERRUPTED, render.stderr  # two passes, but a third never ran
    incomplete = "killed before it finished: 2 of 3 checks recorded"
    assert f"mmharness: INCOMPLETE ({incomplete}): 2 pass (2 checks)" in render.stdout
    results = load_results(run_dir)
    assert [r.id for r in results.records] == ["test_suite.py::test_one", "test_suite.py::test_two"]
    assert results.records[1].outputs == "done"
    assert results.run["started"] == results.records[0].started  # a killed run has no start of its own
    assert (results.run["complete"], results.run["incomplete_reason"]) == (False, "killed before it finished")
    [line] = [json.loads(line) for line in history.read_text().splitlines()]
    assert (line["complete"], line["incomplete_reason"]) == (False, incomplete)
    page = (run_dir / "report.html").read_text()
    assert f"Incomplete run: {incomplete}." in page and "did not finish" in page


INTERRUPTED_SUITE = '''
import os
import signal

def test_one(check_record):
    pass

def test_ctrl_c(check_record):
    os.kill(os.getpid(), signal.SIGINT)

def test_never_reached(check_record):
    pass
'''


def test_interrupted_run_says_so_everywhere(pytester):
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_suite=INTERRUPTED_SUITE)
    run_dir, history = pytester.path / "run", pytester.path / "h.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", f"--results-dir={run_dir}",
                           f"--history={history}", "-p", "no:cacheprovider"], cwd=pytester.path,
                          env=_subprocess_env(), capture_output=True, text=True, timeout=120,
                          # SIGINT as a terminal gives it, even under a `&` job that ignores it.
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout + done.stderr
    incomplete = "interrupted (Ctrl-C / SIGINT): 1 of 3 checks recorded"
    assert f"mmharness: INCOMPLETE ({incomplete}): 1 pass (1 checks)" in done.stdout
    results = load_results(run_dir)
    assert [r.id for r in results.records] == ["test_suite.py::test_one"]
    assert results.run["complete"] is False and results.run["checks_collected"] == 3
    assert results.incompleteness == incomplete
    [line] = [json.loads(line) for line in history.read_text().splitlines()]
    assert (line["complete"], line["incomplete_reason"]) == (False, incomplete)
    assert f"Incomplete run: {incomplete}." in (run_dir / "report.html").read_text()


def test_run_stopped_by_maxfail_is_incomplete(pytester):
    pytester.makepyfile(test_suite="def test_fails(check_record):\n    assert False\n\n"
                                   "def test_not_run(check_record):\n    pass\n")
    result, run_dir = _run(pytester, "-x")
    results = load_results(run_dir)
    assert results.incompleteness == "stopped early: stopping after 1 failures: 1 of 2 checks recorded"
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["mmharness: FAILED, INCOMPLETE (stopped early: *): 1 fail (1 checks)"])


# Another plugin, as the engines plugin uses the records plugin's hooks: it
# adds to every record once, and hands over a teardown check of its own.
OTHER_PLUGIN = '''
import pytest
from harness.results.record import CheckRecord
from harness.verdicts import Cause, Verdict


def pytest_mmharness_record(record, item):
    record.evidence.setdefault("seen_by_other_plugin", []).append(item.name if item else None)
    record.engine, record.engine_version = "offline:vllm", "0.9.2"


@pytest.fixture(scope="session", autouse=True)
def engine(pytestconfig):
    yield
    leak = CheckRecord(id="engine_teardown::tiny", family="engine_teardown",
                       verdict=Verdict.FAIL.value, cause=Cause.LEAK.value,
                       message="2 engine processes survived teardown")
    assert pytestconfig.hook.pytest_mmharness_add_record(config=pytestconfig, record=leak) is True
'''

TEARDOWN_REGISTRY = '''
[[issue]]
check = "engine_teardown::*"
engine_versions = ">=0.9,<0.10"
cause = "leak"
link = "https://example.invalid/vllm/issues/11"
reason = "the tokenizer pool outlives the engine"
'''


def test_other_plugins_add_to_each_record_once_and_hand_over_teardown_checks(pytester):
    pytester.makepyfile(other_plugin=OTHER_PLUGIN,
                        test_suite="def test_pass(check_record):\n    pass\n\n"
                                   "def test_fail(check_record):\n    assert False\n")
    registry = pytester.path / "known_issues.toml"
    registry.write_text(TEARDOWN_REGISTRY)
    pytester.syspathinsert()
    result, run_dir = _run(pytester, "-p", "other_plugin", f"--known-issues={registry}")
    records = {r.id: r for r in load_results(run_dir).records}
    assert {check: r.evidence["seen_by_other_plugin"] for check, r in records.items()} == {
        "test_suite.py::test_pass": ["test_pass"], "test_suite.py::test_fail": ["test_fail"],
        "engine_teardown::tiny": [None]}
    teardown = records["engine_teardown::tiny"]
    # Its own verdict went through the same close: known issues applied to it.
    assert (teardown.verdict, teardown.cause) == ("known issue", "leak")
    assert teardown.known_issue["link"] == "https://example.invalid/vllm/issues/11"
    assert teardown.worker == "main" and teardown.finished
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # test_fail, not the known leak
