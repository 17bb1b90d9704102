"""Merge the workers' record files into results.json with run metadata."""
from __future__ import annotations

import json
from typing import Any

from harness.results.metadata import merge_reported
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.starts import starts_summary
from harness.results.store import RunLayout, read_records, write_results_atomic


def merge_run(layout: RunLayout, run_metadata: dict[str, Any], *, incomplete: str | None) -> RunResults:
    """Read every worker's records and reported metadata and write
    results.json. The worker files are left as they are, whatever is wrong
    with them, so nothing already written is ever lost. `incomplete`: why
    the run did not go to its end (None when it did)."""
    read = read_records(sorted(layout.records_dir.glob("*.jsonl")))
    problems = list(read.problems)
    records = _one_per_check(read.records, problems)

    reported = []
    for meta in sorted(layout.records_dir.glob("*.meta.json")):
        try:
            reported.append(json.loads(meta.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            problems.append(f"{meta}: unreadable run metadata ({exc})")
    run = {**run_metadata, **merge_reported(reported), "complete": incomplete is None}
    run.pop("incomplete_reason", None)
    if incomplete is not None:
        run["incomplete_reason"] = incomplete
    starts = [r.started for r in records if r.started]
    if starts:
        # A killed run never wrote its start: its first record stands in.
        run.setdefault("started", min(starts))
    engine_starts = starts_summary(layout.engine_starts, run.get("started"), run.get("finished"),
                                   _most(run.get("workers")))
    if engine_starts:
        run["engine_starts"] = engine_starts

    results = RunResults(run=run, records=records, problems=problems, path=layout.results_json)
    write_results_atomic(layout.results_json, results.to_json())
    return results


def _most(value: Any) -> int:
    """The workers count the workers reported (several where they disagree: the largest)."""
    values = value if isinstance(value, list) else [value]
    return max((v for v in values if isinstance(v, int)), default=1)


def _one_per_check(records: list[CheckRecord], problems: list[str]) -> list[CheckRecord]:
    by_id: dict[str, CheckRecord] = {}
    for record in records:
        earlier = by_id.get(record.id)
        if earlier is not None:
            problems.append(f"{record.id}: recorded twice (by {earlier.worker} and {record.worker}); "
                            "keeping the later one")
            if (earlier.finished or "") > (record.finished or ""):
                continue
        by_id[record.id] = record
    return sorted(by_id.values(), key=lambda r: r.id)
