"""A check's detail, rendered once: the one list of what a reader sees about
a check, drawn by templates/detail.html.j2. The same HTML goes under
"Failures in detail" and into the table's row detail (inflated by the page's
script when a row is opened)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markupsafe import Markup

from harness.verdicts import Verdict
from harness.report import memory_plot
from harness.report.format import (OUTPUT_CHARS, clip, engine_label, gib, has_memory_timeline, pretty, relative_path,
                                   since_text)
from harness.report.jinja import ENV
from harness.results.history import Streak
from harness.results.record import CheckRecord


def render_detail(record: CheckRecord, index: int, streak: Streak | None, report_dir: Path) -> Markup:
    return Markup(_MACRO(_view(record, index, streak, report_dir)))


def _view(record: CheckRecord, index: int, streak: Streak | None, report_dir: Path) -> dict[str, Any]:
    failed = record.verdict not in (Verdict.PASS.value, Verdict.SKIP.value)
    facts = [
        ("check", record.id), ("cause", record.cause), ("since", since_text(streak)),
        ("isolation", record.evidence.get("isolation")),
        ("engine", engine_label(record.engine, record.engine_version)), ("model", record.model),
        ("parameters", json.dumps(record.params, ensure_ascii=False) if record.params else ""),
        ("durations (s)", json.dumps({k: round(v, 2) for k, v in record.durations.items()
                                      if isinstance(v, (int, float))}) if record.durations else ""),
        ("peak memory", ", ".join(f"{k} {gib(v)}" for k, v in record.peak_memory.items())),
    ]
    files = [("log", relative_path(record.log_path, report_dir)),
             ("timeline", relative_path(record.timeline_path, report_dir))]
    blocks = [("Message", clip(record.message or "", OUTPUT_CHARS[failed])),
              ("Attempts", None if record.attempts is None else pretty(record.attempts)),
              ("First divergence", None if record.divergence is None else pretty(record.divergence)),
              ("Engine output", None if record.outputs is None else clip(pretty(record.outputs), OUTPUT_CHARS[failed])),
              ("Evidence", pretty(record.evidence) if record.evidence else None)]
    return {
        "verdict": record.verdict,
        "facts": [(k, v) for k, v in facts if v],
        "files": [(k, v) for k, v in files if v],  # shown as links
        "known_issue": record.known_issue,
        "blocks": [(title, text) for title, text in blocks if text],
        "log_tail": record.log_tail,
        "memory": {"i": index, "caption": memory_plot.caption(record)} if has_memory_timeline(record) else None,
    }


_MACRO = ENV.get_template("detail.html.j2").module.detail
