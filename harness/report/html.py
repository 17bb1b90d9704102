"""The HTML report: one self-contained file answering, at a glance, what
broke, since when and why.

Order of the page: the verdict counts and run metadata, the diff against a
baseline, failures grouped by cause, the flaky checks with both their
attempts, the filterable table of every check,
then one section per failure with its message, first divergence, log tail
and memory chart. Everything is drawn by Jinja templates
(harness/report/templates/) with autoescape on, so engine output is text
wherever it goes; each check's detail is rendered once (detail.py) and
shown both under "Failures in detail" and in its table row.

Memory charts, failures' and passes' alike, are drawn in the browser by the
vendored uPlot from the page's data (memory_plot.py). One path for every
check: no plotting library is imported at render time (matplotlib's import
alone cost half a second), the page carries a few hundred numbers per chart
rather than an SVG per failure, and a chart's axes and call window are
computed once, in Python, where they are tested.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from markupsafe import Markup

from harness.report import sections
from harness.report.detail import render_detail
from harness.report.diff import diff_runs
from harness.report.format import TRIAGE, has_detail, since_text
from harness.report.jinja import ENV
from harness.report.page_data import page_data, script_json
from harness.report.soak_plot import soak_views
from harness.report.summary import ORDER, summary_line
from harness.results.history import FlakyCount, Streak
from harness.results.run import RunResults
from harness.results.store import write_text_atomic

VENDOR = Path(__file__).resolve().parent / "vendor"


def render_report(results: RunResults, out: Path, *, baseline: RunResults | None = None,
                  streaks: dict[str, Streak] | None = None, flaky: dict[str, FlakyCount] | None = None,
                  history_problems: Iterable[str] = (), memory_pct: float = 10.0) -> Path:
    """`streaks`: each failure's since when (failing_since); `flaky`: how
    often each flaky check was flaky (flaky_counts)."""
    streaks = streaks or {}
    records = sorted(results.records, key=lambda r: (TRIAGE.get(r.verdict, 0), r.id))
    index = {r.id: i for i, r in enumerate(records)}
    details = [render_detail(r, i, streaks.get(r.id), out.parent) for i, r in enumerate(records)]
    page = ENV.get_template("page.html.j2").render(
        title=f"mmharness {results.run.get('run_id', '')}: {summary_line(results)}",
        results=results, history_problems=list(history_problems),
        metadata=sections.metadata_rows(results.run), verdicts=[v.value for v in ORDER],
        diff=diff_runs(baseline, results, memory_pct) if baseline is not None else None,
        index=index, cause_groups=sections.cause_groups(records),
        flaky=sections.flaky_views(records, flaky or {}),
        since={r.id: since_text(streaks.get(r.id)) for r in records},
        fixed=[r for r in records if r.known_issue_fixed],
        chunked=[r for r in records if r.evidence.get("encoder_chunks")],
        fuzzed=sections.fuzz_views(records, out.parent),
        soaked=soak_views(records),
        families=sorted({r.family for r in records}),
        articles=[(i, r.id, details[i]) for i, r in enumerate(records) if has_detail(r)],
        data=script_json(page_data(records, streaks, details)),
        # Vendored, trusted, and inside <style>/<script> where entities would
        # not be decoded: as they are.
        uplot_js=Markup((VENDOR / "uPlot.iife.min.js").read_text(encoding="utf-8")),
        uplot_css=Markup((VENDOR / "uPlot.min.css").read_text(encoding="utf-8")),
    )
    write_text_atomic(out, page)
    return out
