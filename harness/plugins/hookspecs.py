"""Hooks the harness's plugins use to talk to each other.

Registered by the records plugin (`pytest_addhooks`); any plugin may
implement them. The records plugin owns the record pipeline; the engines
and card plugins add what they know to a check's record; the report plugin
draws the run.
"""
from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_mmharness_record(record, item) -> None:
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
def pytest_mmharness_add_record(config, record) -> bool | None:
    """Close and write a record that no pytest test made (an engine's
    teardown check), through the same pipeline as a test's record. A
    verdict, cause and message already set are kept (known issues still
    apply). Implemented by the records plugin; returns True once written."""


@hookspec(firstresult=True)
def pytest_mmharness_run_dir(config):
    """The directory this run writes into (engine logs, log slices,
    timelines beside the records). Implemented by the records plugin."""


@hookspec
def pytest_mmharness_run_metadata(config, fields: dict) -> None:
    """Facts about this run, reported on whichever worker learnt them and
    merged into results.json's `run`: the engine's (engine, engine_version,
    torch, device, engine_python), and how many checks were collected."""


@hookspec
def pytest_mmharness_run_finished(config, results, layout) -> None:
    """The run's results are merged (`results.json` written): draw what
    people read from them (the report). Called on the controller only."""


@hookspec
def pytest_mmharness_engine_start(config, start) -> None:
    """An engine start began (`start.seconds` None) or ended (ready, failed,
    or to be retried; `start.seconds` its time): a
    harness.engines.pool.EngineStart. Called on the process that starts it."""
