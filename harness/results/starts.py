"""Engine starts counted in the run: every worker appends one line per
start that ended (ready, retried or failed) to `engines/starts.jsonl` in the
run directory, and the merged results carry their count, their seconds and
the share of the run they took (`engine_starts` in the run metadata), which
the run's last lines and the report's metadata show.

A start's seconds include its wait for its devices (the CPU tier's engine
turn, held by another worker's `alone` module; a GPU lease), counted apart.
The share is the starts' own seconds (without those waits) over the run's
wall time times its workers: starts ahead overlap with checks, so it may
pass 100 %.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from harness.files import read_json_lines


def append_start(path: Path, line: dict[str, Any]) -> None:
    """One start's line, in one write (workers append to the same file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def starts_summary(path: Path, started: str | None, finished: str | None, workers: int) -> dict[str, Any] | None:
    """The run's engine starts: how many (and how many of them failed or
    were retried), their seconds, and their share of `workers` × the run's
    wall time; None when no engine started."""
    read = read_json_lines(path.read_bytes()) if path.exists() else None
    lines = [line for _, line in (read.values if read else [])
             if isinstance(line, dict) and isinstance(line.get("seconds"), (int, float))]
    if not lines:
        return None
    seconds = sum(line["seconds"] for line in lines)
    waited = sum(line.get("waited_s") or 0.0 for line in lines)
    summary = {"count": len(lines), "seconds": round(seconds, 1), "waited_s": round(waited, 1),
               "not_ready": sum(1 for line in lines if line.get("outcome") != "ready"),
               "ahead": sum(1 for line in lines if line.get("ahead"))}
    wall = _wall_s(started, finished)
    if wall:
        summary["share"] = round((seconds - waited) / (wall * max(workers, 1)), 3)
        summary["workers"], summary["wall_s"] = max(workers, 1), round(wall, 1)
    return summary


def starts_line(summary: dict[str, Any] | None) -> str | None:
    """The run's line about its engine starts."""
    if not summary:
        return None
    not_ready = f" ({summary['not_ready']} not ready)" if summary.get("not_ready") else ""
    waited = (f" ({summary['waited_s']:.0f} s of it waiting for devices)"
              if summary.get("waited_s", 0) >= 1 else "")
    share = (f", {summary['share']:.0%} of {summary['workers']} worker(s) × {summary['wall_s']:.0f} s"
             if "share" in summary else "")
    return (f"mmharness: {summary['count']} engine starts{not_ready}, {summary['seconds']:.0f} s in all{waited}"
            f"{share}")


def _wall_s(started: str | None, finished: str | None) -> float | None:
    try:
        return (dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return None
