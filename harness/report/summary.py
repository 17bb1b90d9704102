"""The one line a run ends with: is there anything new, and where to look."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from harness.results.run import RunResults
from harness.verdicts import Verdict

ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.KNOWN_ISSUE, Verdict.SKIP, Verdict.PASS)


def summary_line(results: RunResults) -> str:
    counts = results.counts
    parts = [f"{counts[v.value]} {v.value}" for v in ORDER if counts.get(v.value)]
    tally = ", ".join(parts) or "no checks"
    if results.problems:
        tally += f", {len(results.problems)} unreadable record line(s)"
    head = "nothing new from the engine" if results.green else "FAILED"
    return f"mmharness: {head}: {tally} ({len(results.records)} checks)"


def print_run_summary(results: RunResults, report: Path, file: TextIO | None = None) -> None:
    """The last lines of `make run`: the summary and the report's path."""
    out = file or sys.stdout
    print(summary_line(results), file=out)
    print(f"mmharness: report: {report}", file=out, flush=True)
