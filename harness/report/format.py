"""Small text helpers shared by the report's templates and its data."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.verdicts import Verdict
from harness.report.summary import ORDER
from harness.results.history import FlakyCount, Streak
from harness.results.record import CheckRecord
from harness.units import GiB

# Checks are listed failures first, in the order a reader triages them.
TRIAGE = {v.value: i for i, v in enumerate(ORDER)}
# Characters of engine output and messages kept for checks that passed or
# were skipped (False) and for the rest (True).
OUTPUT_CHARS = {True: 20_000, False: 600}


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters]"


def pretty(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)


def as_text(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def first_line(message: str) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0][:240] if lines else ""


def engine_label(name: str | None, version: Any) -> str:
    return " ".join(str(part) for part in (name, version) if part)


def since_text(streak: Streak | None) -> str:
    if streak is None:
        return ""
    if streak.runs <= 1:
        return "new in this run"
    return f"failing since {streak.since_run} ({streak.runs} runs)"


def flaky_text(count: FlakyCount | None) -> str:
    if count is None:
        return ""
    return f"flaky in {count.flaky} of the {count.ran} runs of this tier that ran it"


def has_memory_timeline(record: CheckRecord) -> bool:
    return bool(record.memory_timeline and record.memory_timeline.get("t"))


def has_detail(record: CheckRecord) -> bool:
    return record.is_failure or record.verdict in (Verdict.KNOWN_ISSUE.value, Verdict.FLAKY.value)


def css_class(verdict: str) -> str:
    return verdict.replace(" ", "-")


def relative_path(path: str | None, report_dir: Path) -> str | None:
    """A file of the run as the report's reader finds it: relative to the
    report's directory when it lies under it, else as recorded."""
    if not path:
        return path
    try:
        return Path(path).relative_to(report_dir).as_posix()
    except ValueError:
        return path


def gib(value: float) -> str:
    return f"{value / GiB:.2f} GiB"
