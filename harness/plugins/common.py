"""What the harness's plugins share without importing one another (no
plugin imports another plugin's module): which pytest process this is, the
run's history file, the time stamps records carry, and what a check item is.

A run is one process ("main"), or under pytest-xdist one controller, which
collects nothing and runs no check itself, and its workers ("gw0", ...).
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from harness.models import ModelEntry


def is_worker(config: pytest.Config) -> bool:
    """An xdist worker: it collects and runs checks for a controller."""
    return hasattr(config, "workerinput")


def is_controller(config: pytest.Config) -> bool:
    """The xdist controller of a distributed run (`-n N`, N > 0)."""
    return not is_worker(config) and bool(getattr(config.option, "numprocesses", None)) \
        and getattr(config.option, "dist", "no") != "no"


def worker_id(config: pytest.Config) -> str:
    """This process's name in a run: "main", or the xdist worker's id."""
    return config.workerinput["workerid"] if is_worker(config) else "main"


def worker_count(config: pytest.Config) -> int:
    """How many processes run this run's checks: its xdist workers, or 1."""
    return int(config.workerinput["workercount"]) if is_worker(config) else 1


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def history_path(config: pytest.Config) -> Path:
    """The run history file: --history, or reports/history.jsonl at the root."""
    return Path(config.getoption("history", None) or config.rootpath / "reports" / "history.jsonl")


def is_check(item: pytest.Item) -> bool:
    """A check of the harness (it has a record): a scenario's test, or a test
    that asks for its record."""
    scenarios = item.config.rootpath / "scenarios"
    return "check_record" in getattr(item, "fixturenames", ()) or scenarios in item.path.parents


def model_entry_of(item: pytest.Item) -> ModelEntry | None:
    """The matrix entry a check runs on, None for one of no model."""
    callspec = getattr(item, "callspec", None)
    entry = callspec.params.get("model_entry") if callspec else None
    return entry if isinstance(entry, ModelEntry) else None  # NOTSET where a tier has none for it


NUMERIC_PATHS_MARK = "numeric_paths"


def numeric_paths_of(item: pytest.Item) -> tuple[str, ...]:
    """The numeric paths a check's comparisons declare (`@pytest.mark.numeric_paths(...)`
    on the test or its module): the profiles it needs, and the only ones it may use."""
    return tuple(dict.fromkeys(path for mark in item.iter_markers(NUMERIC_PATHS_MARK) for path in mark.args))
