"""Progress lines of a long run: each scenario and model as its checks
begin, with the checks done out of the total, and each engine start with
its time, as the pool reports it (tests/test_engine_retry.py shows what the
pool reports). Quiet under -q. Under xdist: test_results_plugin's xdist run
loads this plugin too."""
from __future__ import annotations

import pytest

from pathlib import Path

from harness.models import models_for
from harness.results.status import ExitStatus

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

PLUGINS = ('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", "harness.plugins.report", '
           '"harness.plugins.progress"]\n')

FAMILY_A = '''
from pathlib import Path

import pytest

from harness.engines.pool import EngineStart
from harness.models import models_for


@pytest.fixture(scope="module")
def engine(pytestconfig):
    """Tells of a start as the engines plugin's pool does: a lost port race, then ready."""
    tell = pytestconfig.hook.pytest_mmharness_engine_start
    for start in [EngineStart("offline", "stub", Path("run/engines/01-offline-stub.log")),
                  EngineStart("offline", "stub", Path("run/engines/01-offline-stub.log"), 1.23, "retrying: port race"),
                  EngineStart("offline", "stub", Path("run/engines/02-offline-stub.log")),
                  EngineStart("offline", "stub", Path("run/engines/02-offline-stub.log"), 34.56, "ready")]:
        tell(config=pytestconfig, start=start)


@pytest.mark.parametrize("model_entry", models_for("cpu")[:2], ids=lambda e: e.name)
def test_one(engine, model_entry, check_record):
    pass


@pytest.mark.parametrize("model_entry", models_for("cpu")[:2], ids=lambda e: e.name)
def test_two(model_entry, check_record):
    pass
'''
FAMILY_B = "def test_three(check_record):\n    pass\n"


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout's harness
    pytester.makeconftest(PLUGINS)
    pytester.makepyfile(test_family_a=FAMILY_A, test_family_b=FAMILY_B)
    return pytester


def _run(pytester, *args):
    # In a process of its own: pytest captures output there as in a real run.
    return pytester.runpytest_subprocess(f"--results-dir={pytester.path / 'run'}",
                                         f"--history={pytester.path / 'h.jsonl'}", "-p", "no:cacheprovider",
                                         *args, timeout=120)


def test_a_run_says_which_scenario_and_engine_it_is_at(suite):
    result = _run(suite)
    assert result.ret == ExitStatus.OK
    first, second = (e.name for e in models_for("cpu")[:2])
    result.stdout.fnmatch_lines([  # in this order, each on a line of its own
        f"mmharness: [[]0/5] test_family_a on {first}",
        "mmharness: starting offline engine stub (engines/01-offline-stub.log)",
        "mmharness: offline engine stub retrying: port race after 1.2 s",
        "mmharness: starting offline engine stub (engines/02-offline-stub.log)",
        "mmharness: offline engine stub ready in 34.6 s",
        f"mmharness: [[]1/5] test_family_a on {second}",
        f"mmharness: [[]2/5] test_family_a on {first}",
        f"mmharness: [[]3/5] test_family_a on {second}",
        "mmharness: [[]4/5] test_family_b",
    ])


def test_quiet_under_q(suite):
    result = _run(suite, "-q")
    assert result.ret == ExitStatus.OK
    assert result.stdout.lines and not [line for line in result.stdout.lines
                                        if line.startswith("mmharness: [") or "engine stub" in line]


def test_xdist_workers_tell_their_own_progress_on_stderr(suite):
    """The workers have no terminal reporter: each writes its lines, named
    by the worker and without counts, to the stderr xdist leaves it."""
    result = _run(suite, "-n", "2", "--dist", "loadfile")
    assert result.ret == ExitStatus.OK, result.stdout.str()[-2000:]
    first = models_for("cpu")[0].name
    result.stderr.fnmatch_lines([
        f"mmharness: gw?: test_family_a on {first}",
        "mmharness: gw?: starting offline engine stub (engines/01-offline-stub.log)",
        "mmharness: gw?: offline engine stub ready in 34.6 s",
    ])
    result.stderr.fnmatch_lines(["mmharness: gw?: test_family_b"])
    assert not [line for line in result.stderr.lines if line.startswith("mmharness: gw") and "/5]" in line]


def test_xdist_workers_are_quiet_under_q(suite):
    result = _run(suite, "-n", "2", "--dist", "loadfile", "-q")
    assert result.ret == ExitStatus.OK
    assert not [line for line in result.stderr.lines + result.stdout.lines if line.startswith("mmharness: gw")]
