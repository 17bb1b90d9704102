"""The hooks the harness's plugins talk through, typed, each named after the
event or the question it carries. Registered by the `hooks` plugin, the
first the root conftest lists, so any plugin may implement or call them
whatever the order the others were registered in; no plugin imports
another's module.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pluggy
import pytest

if TYPE_CHECKING:
    from harness.engines.interpreter import EngineInterpreter
    from harness.engines.pool import EngineStart
    from harness.models import ModelEntry
    from harness.results.known_issues import KnownIssue
    from harness.results.record import CheckRecord
    from harness.results.run import RunResults
    from harness.results.store import RunLayout

hookspec = pluggy.HookspecMarker("pytest")


# --- a check's record -------------------------------------------------------

@hookspec
def pytest_mmharness_record(record: CheckRecord, item: pytest.Item | None) -> None:
    """Add what this plugin knows to a check's record, once, just before the
    record is closed (known issues applied, log tail kept; then written).

    A test's record is closed when its verdict is decided: after the first
    phase (setup, call, teardown) that failed, else after its teardown. So
    `record.verdict` is already folded from pytest's outcome here; a plugin
    may still change it. `item` is the pytest item of the check, or None
    for a record that no test made (an engine's teardown check, a
    collection error, a check whose xdist worker died). Engine facts
    (identity, log slice, peak_memory and memory_timeline, crash) and
    workload facts go in here.
    """


@hookspec(firstresult=True)
def pytest_mmharness_add_record(config: pytest.Config, record: CheckRecord) -> bool | None:
    """Close and write a record that no pytest test made (an engine's
    teardown check), through the same pipeline as a test's record. A
    verdict, cause and message already set are kept (known issues still
    apply). Implemented by the records plugin; returns True once written."""


@hookspec(firstresult=True)
def pytest_mmharness_failure_to_rerun(item: pytest.Item) -> str | None:
    """Asked once a check's attempt has run its setup and call (before its
    teardown), by the reruns plugin where --reruns allows one: the attempt's
    cause when it is a failure a rerun can tell flaky from confirmed
    (harness/results/attempts.py), else None. An answer is a promise kept:
    the check runs again, and the answerer (the records plugin) holds this
    attempt's record back until the rerun's is closed, then writes one
    record of both."""


@hookspec
def pytest_mmharness_rerun(item: pytest.Item, cause: str, held: list) -> None:
    """A failed check runs again, on fresh engines: called at the start of
    the rerun's setup, after the module-scoped fixtures that held the failed
    attempt's runs (`held`, their values) were torn down, before they are
    computed again. The engines of those runs and of the runs the check
    read are retired here (the engines plugin), so the rerun runs on new
    ones of the same specs (started ahead on the CPU tier); `cause` is the
    first attempt's."""


# --- the run ------------------------------------------------------------------

@hookspec(firstresult=True)
def pytest_mmharness_run_dir(config: pytest.Config) -> Path | None:
    """The directory this run writes into (engine logs, log slices,
    timelines beside the records). Implemented by the run plugin."""


@hookspec
def pytest_mmharness_run_metadata(config: pytest.Config, fields: dict) -> None:
    """Facts about this run, reported on whichever worker learnt them and
    merged into results.json's `run`: the engine's (engine, engine_version,
    torch, device, engine_python), and how many checks were collected."""


@hookspec
def pytest_mmharness_run_finished(config: pytest.Config, results: RunResults, layout: RunLayout) -> None:
    """The run's results are merged (`results.json` written): draw what
    people read from them (the report). Called on the controller only."""


# --- what the run is made of ---------------------------------------------------

@hookspec(firstresult=True)
def pytest_mmharness_engine_interpreter(config: pytest.Config) -> EngineInterpreter | None:
    """The interpreter that runs the engines (--engine-python). Implemented by
    the matrix plugin."""


@hookspec(firstresult=True)
def pytest_mmharness_models(config: pytest.Config) -> list[ModelEntry] | None:
    """The matrix entries this run's options select (--tier, --model).
    Implemented by the matrix plugin."""


@hookspec(firstresult=True)
def pytest_mmharness_known_issues(config: pytest.Config) -> list[KnownIssue] | None:
    """The known-issues registry the run applies. Implemented by the records plugin."""


# --- engines --------------------------------------------------------------------

@hookspec
def pytest_mmharness_engine_start(config: pytest.Config, start: EngineStart) -> None:
    """An engine start began (`start.seconds` None) or ended (ready, failed,
    or to be retried; `start.seconds` its time). Called on the process that
    starts it."""
