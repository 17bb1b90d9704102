"""One run's results as read back from results.json."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harness.verdicts import Verdict
from harness.results.record import CheckRecord

SCHEMA = 1


class ResultsError(Exception):
    """A results file that cannot be used, with the reason in plain words."""


@dataclasses.dataclass
class RunResults:
    run: dict[str, Any]
    records: list[CheckRecord]
    # Lines of the worker files that could not be read: each may hide a lost
    # failure, so a run with any is not green.
    problems: list[str] = dataclasses.field(default_factory=list)
    path: Path | None = None

    @property
    def counts(self) -> dict[str, int]:
        counts = {v.value: 0 for v in Verdict}
        for record in self.records:
            verdict = record.verdict or Verdict.ERROR.value
            counts[verdict] = counts.get(verdict, 0) + 1
        return counts

    @property
    def failures(self) -> list[CheckRecord]:
        return [r for r in self.records if r.is_failure]

    @property
    def flaky(self) -> list[CheckRecord]:
        """Checks whose failure did not come back on a rerun (harness/results/attempts.py)."""
        return [r for r in self.records if r.verdict == Verdict.FLAKY.value]

    @property
    def complete(self) -> bool:
        """The run went to its end. Set by whatever merged it; a results.json
        from before the field existed is complete if its run finished."""
        return bool(self.run.get("complete", self.run.get("finished")))

    @property
    def incompleteness(self) -> str | None:
        """Why the run is incomplete and how much of it was recorded, for
        people; None for a complete run."""
        if self.complete:
            return None
        reason = self.run.get("incomplete_reason") or "did not finish"
        collected = self.run.get("checks_collected")
        of = f" of {collected}" if isinstance(collected, int) else ""
        return f"{reason}: {len(self.records)}{of} checks recorded"

    @property
    def green(self) -> bool:
        """Nothing new from the engine: the run went to its end, with no
        failure or error (known issues apart), no flaky check and no record
        lost to an unreadable line."""
        return self.complete and not self.failures and not self.flaky and not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "run": self.run, "counts": self.counts,
                "problems": self.problems, "records": [r.to_json() for r in self.records]}


def results_path(path: Path) -> Path:
    """Accept a run directory or its results.json."""
    return path / "results.json" if path.is_dir() else path


def load_results(path: Path) -> RunResults:
    file = results_path(Path(path))
    if not file.exists():
        raise ResultsError(f"{file}: no such results file (give a run directory or its results.json)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{file}: not a readable results file: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(f"{file}: expected a results.json of schema {SCHEMA}, "
                           f"found schema {data.get('schema') if isinstance(data, dict) else None!r}")
    records = []
    for index, raw in enumerate(data.get("records", [])):
        try:
            records.append(CheckRecord.from_json(raw))
        except (ValueError, TypeError) as exc:
            raise ResultsError(f"{file}: record #{index} is malformed: {exc}") from exc
    return RunResults(run=data.get("run", {}), records=records,
                      problems=list(data.get("problems", [])), path=file)
