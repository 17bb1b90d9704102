"""The records' JSON the page's script reads: the table's rows and each
check's detail, drawn on demand."""
from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from harness.checks.verdicts import Verdict
from harness.report.format import (OUTPUT_CHARS, TRIAGE, clip, engine_label, first_line, has_detail,
                                   has_memory_timeline, since_text)
from harness.report.timeline import downsample
from harness.results.history import Streak
from harness.results.record import CheckRecord
from harness.units import MiB

# The browser draws this many points per check; failures also get a figure
# drawn from the record's full timeline.
PAGE_POINTS = 48


def script_json(value: Any) -> str:
    """JSON inside <script type=application/json>: no '<' may survive, or a
    '</script>' in model output would end the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_data(records: list[CheckRecord], streaks: dict[str, Streak], figures: dict[str, str],
              run_engine: str, run_dir: Path) -> dict[str, Any]:
    """The table's rows as plain JSON, read when the page opens; every
    check's detail as one gzipped, base64 blob that the page inflates the
    first time a reader opens a row. Most of the bytes are details nobody
    opens, so the page opens as fast as the table alone."""
    rows = [_row(r, i, streaks.get(r.id), figures.get(r.id)) for i, r in enumerate(records)]
    details = [_detail(r, run_engine, run_dir) for r in records]
    blob = json.dumps(details, ensure_ascii=False, separators=(",", ":"), default=repr).encode()
    return {"engine": run_engine, "records": rows,
            "details": base64.b64encode(gzip.compress(blob, mtime=0)).decode("ascii")}


def _row(record: CheckRecord, index: int, streak: Streak | None, figure: str | None) -> dict[str, Any]:
    peak_name, peak = max(record.peak_memory.items(), key=lambda kv: kv[1], default=(None, None))
    row = {
        "id": record.id, "family": record.family, "verdict": record.verdict,
        "triage": TRIAGE.get(record.verdict, 0), "cause": record.cause, "model": record.model,
        "summary": first_line(record.message)[:120],
        "total": round(sum(v for v in record.durations.values() if isinstance(v, (int, float))), 2),
        "peak": peak, "peak_name": peak_name,
    }
    if streak is not None:
        row["since"], row["since_runs"] = since_text(streak), streak.runs
    if has_detail(record):
        row["article"] = index
    if figure:
        row["figure"] = figure
    return _compact(row)


def _detail(record: CheckRecord, run_engine: str, run_dir: Path) -> dict[str, Any]:
    failed = record.verdict not in (Verdict.PASS.value, Verdict.SKIP.value)
    engine = engine_label(record.engine, record.engine_version)
    fields = record.to_json()
    detail = {
        "message": clip(record.message or "", OUTPUT_CHARS[failed]),
        "engine": engine if engine != run_engine else None,
        "params": fields["params"],
        "durations": {k: round(v, 2) for k, v in record.durations.items() if isinstance(v, (int, float))},
        "peak_memory": record.peak_memory, "memory_budget": record.memory_budget,
        "divergence": fields["divergence"], "evidence": fields["evidence"],
        "timeline_path": _relative(record.timeline_path, run_dir),
        "log_path": _relative(record.log_path, run_dir),
    }
    if record.outputs is not None:
        text = record.outputs if isinstance(record.outputs, str) else json.dumps(
            record.outputs, ensure_ascii=False, default=repr)
        detail["outputs"] = clip(text, OUTPUT_CHARS[failed])
    if has_memory_timeline(record):
        detail["memory_timeline"] = _compact_timeline(downsample(record.memory_timeline, PAGE_POINTS))
    return _compact(detail)


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value not in (None, "", [], {})}


def _relative(path: str | None, run_dir: Path) -> str | None:
    if not path:
        return None
    prefix = str(run_dir) + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _compact_timeline(timeline: dict[str, Any]) -> dict[str, Any]:
    """Memory in MiB, and evenly spaced times as a start and a step."""
    t = timeline["t"]
    step = (t[-1] - t[0]) / (len(t) - 1) if len(t) > 1 else 0
    even = step > 0 and all(abs(x - (t[0] + i * step)) <= 0.01 * step for i, x in enumerate(t))
    return {"t": {"start": round(t[0], 3), "step": round(step, 4), "n": len(t)} if even
            else [round(x, 2) for x in t],
            "mib": {name: [None if v is None else round(v / MiB) for v in values]
                    for name, values in timeline["series"].items()}}
