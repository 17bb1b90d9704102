"""The records' JSON the page's script reads: the table's rows, and each
check's detail (its HTML and its memory chart's data), drawn on demand."""
from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from markupsafe import Markup

from harness.report import memory_plot
from harness.report.format import TRIAGE, first_line, has_detail, has_memory_timeline, since_text
from harness.results.history import Streak
from harness.results.record import CheckRecord


def script_json(value: Any) -> Markup:
    """JSON inside <script type=application/json>: no '<' may survive, or a
    '</script>' in model output would end the element. Safe as it is, so
    the template takes it unescaped (entities are not decoded in a script)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def page_data(records: list[CheckRecord], streaks: dict[str, Streak], details: list[Markup]) -> dict[str, Any]:
    """The table's rows as plain JSON, read when the page opens; every
    check's detail (`details`, one per record) and chart data as one
    gzipped, base64 blob that the page inflates the first time it shows a
    detail. Most of the bytes are details nobody opens, so the page opens as
    fast as the table alone."""
    rows = [_row(r, i, streaks.get(r.id)) for i, r in enumerate(records)]
    entries = [_compact({"html": str(html), "plot": _plot(r)}) for r, html in zip(records, details)]
    blob = json.dumps(entries, ensure_ascii=False, separators=(",", ":"), default=repr).encode()
    return {"records": rows, "details": base64.b64encode(gzip.compress(blob, mtime=0)).decode("ascii")}


def _row(record: CheckRecord, index: int, streak: Streak | None) -> dict[str, Any]:
    peak_name, peak = max(record.peak_memory.items(), key=lambda kv: kv[1], default=(None, None))
    row = {
        "id": record.id, "family": record.family, "verdict": record.verdict,
        "triage": TRIAGE.get(record.verdict, 0), "cause": record.cause, "model": record.model,
        "summary": first_line(record.message)[:120],
        "total": round(record.seconds, 2),
        "peak": peak, "peak_name": peak_name,
    }
    if streak is not None:
        row["since"], row["since_runs"] = since_text(streak), streak.runs
    row["caveat"] = caveat(record)
    if has_detail(record):
        row["article"] = index
    return _compact(row)


def caveat(record: CheckRecord) -> str | None:
    """What a pass could not stand on: a check that passed against a remote
    server whose caches the harness cannot see passed without observed
    isolation, and is never shown as isolated; one whose comparison used an
    unmeasured noise profile (the GPU tier's, until measured) says so."""
    if record.verdict != "pass":
        return None
    notes = []
    if str(record.evidence.get("isolation", "")).startswith("not observed"):
        notes.append("without observed isolation")
    profiles = record.evidence.get("noise_profiles") or {}
    if any(isinstance(p, dict) and p.get("measured") == "unmeasured" for p in profiles.values()):
        notes.append("tolerance unmeasured")
    return f"({'; '.join(notes)})" if notes else None


def _plot(record: CheckRecord) -> dict[str, Any] | None:
    if not has_memory_timeline(record):
        return None
    points = memory_plot.FAILURE_POINTS if has_detail(record) else memory_plot.PAGE_POINTS
    return memory_plot.plot_data(record, points)


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value not in (None, "", [], {})}
