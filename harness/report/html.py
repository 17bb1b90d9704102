"""The HTML report: one self-contained file answering, at a glance, what
broke, since when and why.

Order of the page: the verdict counts and run metadata, the diff against a
baseline, failures grouped by cause, the filterable table of every check,
then one section per failure with its message, first divergence, log tail
and memory figure (drawn here from the record's memory timeline). Engine
output is untrusted: the sections escape it and the page's script only
ever sets it as text.
"""
from __future__ import annotations

import base64
import gzip
import re
from html import escape
from pathlib import Path
from typing import Iterable

from harness.checks.verdicts import Verdict
from harness.report import sections
from harness.report.diff import diff_runs
from harness.report.format import TRIAGE, engine_label, has_memory_timeline
from harness.report.page_data import page_data, script_json
from harness.report.plots import memory_figure_svg
from harness.report.summary import summary_line
from harness.results.history import Streak
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.store import write_text_atomic

TEMPLATE = Path(__file__).resolve().parents[2] / "reports" / "template.html"
VENDOR = Path(__file__).resolve().parent / "vendor"


def render_report(results: RunResults, out: Path, *, baseline: RunResults | None = None,
                  streaks: dict[str, Streak] | None = None, history_problems: Iterable[str] = (),
                  memory_pct: float = 10.0) -> Path:
    streaks = streaks or {}
    records = sorted(results.records, key=lambda r: (TRIAGE.get(r.verdict, 0), r.id))
    index = {r.id: i for i, r in enumerate(records)}
    figures, missing = _figures(records)
    run_engine = engine_label(results.run.get("engine"), results.run.get("engine_version"))
    diff = diff_runs(baseline, results, memory_pct) if baseline is not None else None
    body = "\n".join([
        sections.summary(results, list(history_problems)),
        sections.diff_section(diff, index) if diff else "",
        sections.failures_by_cause(records, index, streaks),
        sections.appears_fixed(records, index),
        sections.table(records),
        sections.encoder_chunks(records, index),
        sections.failure_details(records, index, streaks, figures, missing),
    ])
    page = _fill(TEMPLATE.read_text(encoding="utf-8"), {
        "TITLE": escape(f"mmharness {results.run.get('run_id', '')}: {summary_line(results)}"),
        "BODY": body,
        "DATA": script_json(page_data(records, streaks, figures, run_engine, out.parent)),
        "UPLOT_JS": (VENDOR / "uPlot.iife.min.js").read_text(encoding="utf-8"),
        "UPLOT_CSS": (VENDOR / "uPlot.min.css").read_text(encoding="utf-8"),
    })
    write_text_atomic(out, page)
    return out


def _fill(template: str, parts: dict[str, str]) -> str:
    # One pass, so a placeholder inside inserted text is never expanded.
    return re.sub(r"__MMH_([A-Z_]+?)__", lambda m: parts[m.group(1)], template)


def _figures(records: list[CheckRecord]) -> tuple[dict[str, str], dict[str, str]]:
    """A matplotlib figure of the memory timeline of each check that did not
    pass, gzipped and in base64 (a quarter of the SVG's size; the page
    inflates one as it comes into view), and a line for each figure that
    could not be drawn."""
    figures, missing = {}, {}
    for record in records:
        if record.verdict in (Verdict.PASS.value, Verdict.SKIP.value) or not has_memory_timeline(record):
            continue
        try:
            svg = memory_figure_svg(record.memory_timeline, record.memory_budget).encode()
        except Exception as exc:  # one bad timeline must not cost the page
            missing[record.id] = f"memory figure not drawn: {type(exc).__name__}: {exc}"
            continue
        figures[record.id] = base64.b64encode(gzip.compress(svg, mtime=0)).decode("ascii")
    return figures, missing
