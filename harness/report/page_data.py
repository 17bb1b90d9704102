"""The records' JSON the page's script reads: the table's rows and each
check's detail, drawn on demand. The page carries one entry per check, so
each is kept small."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.report.format import MIB, OUTPUT_CHARS, TRIAGE, clip, engine_label, has_detail, since_text
from harness.results.history import Streak
from harness.results.record import CheckRecord
from harness.verdicts import Verdict


def script_json(value: Any) -> str:
    """JSON inside <script type=application/json>: no '<' may survive, or a
    '</script>' in model output would end the element."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def page_record(record: CheckRecord, index: int, streak: Streak | None, figure: str | None,
                run_engine: str, run_dir: Path) -> dict[str, Any]:
    """What the page's script needs to list a check and show it on demand.
    The page carries one of these for every check, so it is kept small:
    what the whole run shares (the engine) and what is shown server-side
    (log tails) stay out."""
    failed = record.verdict not in (Verdict.PASS.value, Verdict.SKIP.value)
    engine = engine_label(record.engine, record.engine_version)
    fields = record.to_json()
    data = {
        "id": record.id, "family": record.family, "verdict": record.verdict,
        "triage": TRIAGE.get(record.verdict, 0), "cause": record.cause,
        "message": clip(record.message or "", OUTPUT_CHARS[failed]), "model": record.model,
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
        data["outputs"] = clip(text, OUTPUT_CHARS[failed])
    if record.memory_timeline:
        data["memory_timeline"] = _compact_timeline(record.memory_timeline)
    if streak is not None:
        data["since"], data["since_runs"] = since_text(streak), streak.runs
    if has_detail(record):
        data["article"] = index
    if figure:
        data["figure"] = figure
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
            "mib": {name: [None if v is None else round(v / MIB) for v in values]
                    for name, values in timeline["series"].items()}}
