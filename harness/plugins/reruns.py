"""pytest plugin: a check that failed runs once more, on fresh engines with
the same arguments and workload, so that a failure whose cause does not
come back (`flaky`) is told from one that does (confirmed)
(`--reruns 0|1`: make run and make nightly 1, plain pytest 0).

Which failures are rerun, and the one record both attempts leave, are the
records plugin's (harness/results/attempts.py), asked through
`pytest_mmharness_failure_to_rerun` once the attempt's setup and call have
run. The rerun happens at once, on the process (the xdist worker) that ran
the check:

- The first attempt's teardown tears down the check itself only: the
  module's fixtures stay, and so do its session's (the engine pool).
- At the rerun's setup, the module-scoped fixtures (and class- or
  package-scoped ones) that hold a run (a `Run`, or a Soak's engine use) or
  failed are torn down, with whatever depends on them; the engines their
  runs and the check's own runs used are retired through the pool
  (`pytest_mmharness_rerun`, the engines plugin, which starts new ones of
  the same specs ahead); then setup computes those fixtures again, on them. Fixtures holding no run
  (the runner, a workload) are kept: the same arguments and workload.
- Checks that already passed on the old runs are not rerun; the module's
  later checks read the rerun's runs.

A failure in the check's teardown alone is not rerun: its verdict is known
only once the check's fixtures are gone. Under `--pdb` nothing is rerun.
"""
from __future__ import annotations

import pytest
from _pytest.runner import call_and_report  # pytest's own phases: the rerun is decided between call and teardown

from harness.plugins.common import is_check
from harness.runner.run import holds_runs

# Set for a check's rerun: its setup recomputes what the failed attempt's runs came from.
RERUN_OF = pytest.StashKey[str]()  # the first attempt's cause


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness").addoption(
        "--reruns", type=int, choices=(0, 1), default=0,
        help="run a failed check once more on fresh engines: a failure whose cause does not come back is "
             "flaky (exit status 7), one that does is confirmed; known issues, harness errors, unsupported "
             "checks and skips are not rerun (default 0; make run: 1)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """pytest's protocol, with the rerun decided between call and teardown;
    only the last attempt's reports are logged (pytest, xdist and JUnit see
    one outcome per check, the record holds both)."""
    config = item.config
    if not is_check(item) or not config.getoption("reruns", 0) or config.getoption("usepdb", False):
        return None  # pytest's own protocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports, cause = _attempt(item, nextitem, may_rerun=True)
    if cause is not None:
        item.stash[RERUN_OF] = cause
        reports, _ = _attempt(item, nextitem, may_rerun=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _attempt(item: pytest.Item, nextitem: pytest.Item | None, *,
             may_rerun: bool) -> tuple[list[pytest.TestReport], str | None]:
    """One run of the check, as pytest's runtestprotocol does it, and the
    cause to rerun it for (None: no rerun)."""
    if hasattr(item, "_request") and not item._request:  # a rerun: as runtestprotocol renews it
        item._initrequest()
    cause = None
    try:
        reports = [call_and_report(item, "setup", log=False)]
        if reports[0].passed and not item.config.getoption("setuponly", False):
            reports.append(call_and_report(item, "call", log=False))
        stopping = item.session.shouldfail or item.session.shouldstop
        if may_rerun and not stopping:
            cause = item.config.hook.pytest_mmharness_failure_to_rerun(item=item)
        # Rerun: only the check itself is torn down. Stopping: everything, so
        # that fixture teardown errors are reported (as runtestprotocol does).
        after = item.parent if cause is not None else None if stopping else nextitem
        reports.append(call_and_report(item, "teardown", log=False, nextitem=after))
    finally:
        if hasattr(item, "_request"):
            item._request = False
            item.funcargs = None
    return reports, cause


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """The rerun's setup, before pytest computes the check's fixtures: the
    failed attempt's runs are let go, their engines retired. An error here
    is the rerun's setup error."""
    cause = item.stash.get(RERUN_OF, None)
    if cause is None:
        return
    del item.stash[RERUN_OF]
    stale = _stale_fixtures(item)
    held = [d.cached_result[0] for d in stale if d.cached_result[2] is None]
    for fixturedef in stale:
        fixturedef.finish(request=item._request)  # its dependents first: they registered with it
    item.config.hook.pytest_mmharness_rerun(item=item, cause=cause, held=held)


def _stale_fixtures(item: pytest.Item) -> list:
    """The check's fixtures wider than itself but narrower than the session
    that hold a run or whose setup failed (pytest would raise the cached
    error again)."""
    info = getattr(item, "_fixtureinfo", None)
    stale = []
    for fixturedefs in (info.name2fixturedefs.values() if info else ()):
        for fixturedef in fixturedefs:
            cached = fixturedef.cached_result
            if fixturedef.scope in ("function", "session") or cached is None:
                continue
            if cached[2] is not None or holds_runs(cached[0]):
                stale.append(fixturedef)
    return stale
