"""The record one check leaves behind, and how it is turned into JSON."""
from __future__ import annotations

import dataclasses
import enum
import math
import os
from pathlib import Path
from typing import Any

from harness.verdicts import Verdict
from harness.files import log_tail

MEMORY_TIMELINE_POINTS = 400


# A record's fields, in the order a reader of results.json meets them.
@dataclasses.dataclass
class CheckRecord:
    id: str
    family: str = ""
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    tier: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    # The CPU engine's host, as it ran: the kernel library its processes
    # mapped, the features it saw and the level they were forced to
    # ({"kernels": "_C_AVX2", "isa": ["avx2"], "kernel_level": "native"}).
    # Known issues may be conditioned on it. None: not a local CPU engine.
    host: dict[str, Any] | None = None
    model: str | None = None
    verdict: str | None = None
    cause: str | None = None
    message: str = ""
    divergence: Any = None
    evidence: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Engine output is untrusted text: the report escapes it wherever it goes.
    outputs: Any = None
    durations: dict[str, float] = dataclasses.field(default_factory=dict)
    # Memory, put here by the engines plugin. peak_memory: bytes at peak,
    # keyed by series, a device or a process ("cuda:0", "engine-rss").
    # memory_timeline: {"t": [seconds from the window's start, ...],
    # "series": {name: [bytes or None, ...]}}, at most
    # MEMORY_TIMELINE_POINTS points, each its bucket's maximum so the peak
    # survives. timeline_path: the full-resolution CSV, for people; nothing
    # in the harness reads it back.
    peak_memory: dict[str, int] = dataclasses.field(default_factory=dict)
    memory_timeline: dict[str, Any] | None = None
    # [start, end] of the check's own call, in seconds on memory_timeline's
    # clock: the timeline also holds the scenario's runs before it. None
    # when unknown (no call phase, or a results.json from before the field).
    call_window: list[float] | None = None
    # Card budget in bytes for the series that have one, drawn on the plot.
    memory_budget: dict[str, int] = dataclasses.field(default_factory=dict)
    timeline_path: str | None = None
    log_path: str | None = None
    # Filled when the record is closed, for checks that did not pass, so
    # results.json is readable on its own after the run directory has been
    # copied elsewhere.
    log_tail: str | None = None
    known_issue: dict[str, Any] | None = None
    known_issue_fixed: dict[str, Any] | None = None
    # A check that failed and ran again on fresh engines: each attempt's
    # verdict, cause, message and where its evidence lies, the first attempt
    # first (harness/results/attempts.py). None: it ran once.
    attempts: list[dict[str, Any]] | None = None
    worker: str = "main"
    started: str | None = None
    finished: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Fields as they are; a check may have put any value in them, so
        whatever writes new records passes this through `json_safe`."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "CheckRecord":
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ValueError("a record must be a JSON object with a string 'id'")
        known = {f.name for f in dataclasses.fields(cls)}
        # Fields from a newer harness are kept out rather than failing the read.
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def seconds(self) -> float:
        """The check's time: its phases' (engine starts included), and its rerun's."""
        return sum(v for v in self.durations.values() if isinstance(v, (int, float)))

    @property
    def is_failure(self) -> bool:
        """Fails the run: a failed check or a harness error, known issues apart."""
        return self.verdict in (Verdict.FAIL.value, Verdict.ERROR.value)


def json_safe(value: Any) -> Any:
    """Turn parameter values and evidence into plain JSON without losing the
    reader's sense of what they were (enums by value, paths as text, NaN as
    a string, anything else by its repr)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, (Path, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return json_safe(value.tolist())
    return repr(value)


# The end of the engine log kept in a failing check's record, so results.json
# still explains the failure once the run directory is copied elsewhere.
LOG_TAIL_BYTES = 12_000
LOG_TAIL_LINES = 80


def record_log_tail(log: Path) -> str:
    return "\n".join(log_tail(log, LOG_TAIL_LINES, max_bytes=LOG_TAIL_BYTES))
