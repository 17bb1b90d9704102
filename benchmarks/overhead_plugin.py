"""A pytest plugin for benchmarks/bench_overhead.py: times what the engines
do (start-ups, requests, shutdowns, HF references) and the harness's own
hooks (collection, records, the report), and the samplers' CPU, then writes
them as JSON to $MMHARNESS_OVERHEAD_OUT at the end of the session.

Engine time is the union of the intervals in which any thread was inside
an engine call, so concurrent requests count once."""
from __future__ import annotations

import functools
import json
import os
import threading
import time

import pytest

from harness.engines.base import Engine
from harness.engines.offline import OfflineEngine
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.server import ServerEngine
from harness.memory.samplers.base import Sampler
from harness.references.hf import HfReference

_lock = threading.Lock()
SPANS: dict[str, list[tuple[float, float]]] = {}  # what -> [(start, end)] on the monotonic clock
SAMPLER_CPU = [0.0]
T0 = time.monotonic()

# (class, method, what it is): wrapped for the session.
ENGINE_CALLS = [
    (OfflineEngine, "start", "engine start-up"), (ServerEngine, "start", "engine start-up"),
    (HfReference, "__init__", "engine start-up"),
    (OfflineEngine, "chat", "requests"), (OpenAIEngine, "chat", "requests"), (OpenAIEngine, "_post", "requests"),
    (OpenAIEngine, "healthy", "requests"), (HfReference, "chat", "requests"),
    (Engine, "close", "engine shutdown"), (Engine, "settle", "engine shutdown"),
]


def _span(what: str, start: float) -> None:
    with _lock:
        SPANS.setdefault(what, []).append((start, time.monotonic()))


def _timed(method, what: str):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        start = time.monotonic()
        try:
            return method(*args, **kwargs)
        finally:
            _span(what, start)
    return wrapper


def _sampler_stop(stop):
    @functools.wraps(stop)
    def wrapper(self):
        result = stop(self)
        SAMPLER_CPU[0] += result.cpu_seconds
        return result
    return wrapper


def pytest_configure(config: pytest.Config) -> None:
    for cls, name, what in ENGINE_CALLS:
        if name in vars(cls):  # wrap where it is defined, once
            setattr(cls, name, _timed(vars(cls)[name], what))
    Sampler.stop = _sampler_stop(Sampler.stop)


def _around(what: str):
    @pytest.hookimpl(hookwrapper=True)
    def hook(*args, **kwargs):
        start = time.monotonic()
        yield
        _span(what, start)
    return hook


pytest_collection = _around("collection")
pytest_runtest_makereport = _around("records")
pytest_runtest_logreport = _around("records")
pytest_sessionfinish = _around("results and report")  # merge, host facts, history, the report


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get("MMHARNESS_OVERHEAD_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"wall_s": time.monotonic() - T0, "spans": SPANS, "sampler_cpu_s": SAMPLER_CPU[0]}, f)
