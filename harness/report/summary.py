"""The one line a run ends with: is there anything new, and where to look."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from harness.verdicts import Verdict
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.starts import starts_line

ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.FLAKY, Verdict.KNOWN_ISSUE, Verdict.UNSUPPORTED, Verdict.SKIP,
         Verdict.PASS)


def summary_line(results: RunResults) -> str:
    counts = results.counts
    parts = [f"{counts[v.value]} {v.value}" for v in ORDER if counts.get(v.value)]
    tally = ", ".join(parts) or "no checks"
    if results.problems:
        tally += f", {len(results.problems)} problem(s) reading the records (unreadable or duplicate lines)"
    if results.green:
        head = "nothing new from the engine"
    else:
        failed = ["FAILED"] if results.failures or results.problems else []
        flaky = ["FLAKY"] if results.flaky else []
        incomplete = [] if results.complete else [f"INCOMPLETE ({results.incompleteness})"]
        head = ", ".join(failed + flaky + incomplete)
    return f"mmharness: {head}: {tally} ({len(results.records)} checks)"


def flaky_line(record: CheckRecord) -> str:
    """A flaky check, never left out: what its first attempt failed with,
    and that its rerun on fresh engines passed."""
    message = (record.message or "").strip().splitlines()
    said = f" ({message[0][:200]})" if message else ""
    return f"mmharness: flaky: {record.id}: {record.cause}{said}, then passed on fresh engines"


def summary_lines(results: RunResults, report: Path) -> list[str]:
    """The last lines of `make run`: the summary, each flaky check, the
    engine starts, and the report's path."""
    starts = starts_line(results.run.get("engine_starts"))
    return [summary_line(results), *map(flaky_line, results.flaky), *([starts] if starts else []),
            f"mmharness: report: {report}"]


def print_run_summary(results: RunResults, report: Path, file: TextIO | None = None) -> None:
    print("\n".join(summary_lines(results, report)), file=file or sys.stdout, flush=True)
