"""`python -m harness report merge`: a run's shards, joined into one
results.json, one report.html and JUnit XML (junit.xml with one suite per
shard, and junit/shard-I-of-N.xml each).

Every input is read and the shards checked to belong together before
anything is written; each file is written whole (to a temporary name,
then renamed), into a directory that holds no results yet.

With --history, each shard's line is added there (once: a line already
present is not added again), and each failing check's "since" is counted
from its own shard's line: a shard leaves its line to this command, so
that every shard of a run plans from the same history.

A shard's records name its files (log slices, timelines) where the shard
wrote them, on its own machine; the merged report links them where they
are now, in the shard directory given, relative to the output.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness.report.html import render_report
from harness.report.junit import testsuite, write_junit
from harness.results.history import append_history, failing_since, flaky_counts, history_entry, read_history
from harness.results.join import ShardJoinError, join_shards
from harness.results.run import RunResults, load_results
from harness.results.store import write_results_atomic


@dataclasses.dataclass
class Merged:
    results: RunResults
    report: Path
    junit: list[Path]


def merge_shard_runs(inputs: list[Path], out: Path, history: Path | None = None) -> Merged:
    parts = [load_results(path) for path in inputs]
    for part in parts:
        _rebase_files(part, out)
    merged = join_shards(parts)
    if history is not None:
        _check_history(history, parts)
    if out.exists() and not out.is_dir() or (out / "results.json").exists():
        raise ShardJoinError(f"{out}: not a directory, or already holds a results.json; give -o a new directory")
    merged.path = out / "results.json"
    write_results_atomic(merged.path, merged.to_json())

    parts.sort(key=lambda part: part.run["shard"]["index"])
    suites = [testsuite(part, _label(part)) for part in parts]
    junit = [write_junit(out / "junit.xml", suites, merged.run["run_id"])]
    junit += [write_junit(out / "junit" / f"{_label(part).replace(' ', '-').replace('/', '-of-')}.xml",
                          [suite], _label(part)) for part, suite in zip(parts, suites)]

    streaks, flaky, problems = {}, {}, []
    if history is not None:
        for part in parts:
            append_history(history, history_entry(_run_id(part), part))
        read = read_history(history)
        problems = read.problems
        for part in parts:
            streaks.update(failing_since(read.entries, _run_id(part)))
            flaky.update(flaky_counts(read.entries, _run_id(part)))
    report = render_report(merged, out / "report.html", streaks=streaks, flaky=flaky, history_problems=problems)
    return Merged(merged, report, junit)


def _check_history(history: Path, parts: list[RunResults]) -> None:
    """A line is added once per run id, which is the run directory's name:
    a shard in a directory of the same name as an earlier run's would be
    silently left out of the history."""
    started = {e["run_id"]: e.get("started") for e in read_history(history).entries}
    for part in parts:
        run_id = _run_id(part)
        if run_id in started and started[run_id] != part.run.get("started"):
            raise ShardJoinError(
                f"{history}: already holds a run {run_id!r} started {started[run_id]}, not {part.path} "
                f"(started {part.run.get('started')}): give each shard run a results directory of its own name")


def _label(part: RunResults) -> str:
    return f"shard {part.run['shard']['index']}/{part.run['shard']['count']}"


def _run_id(part: RunResults) -> str:
    return part.run.get("run_id") or part.path.parent.name


def _rebase_files(part: RunResults, out: Path) -> None:
    """Each record's files, moved from where the shard wrote them (under a
    directory named after its run id) to the shard's directory as given,
    relative to `out`; a path outside the shard's run is left as it is."""
    here, run_id = part.path.parent, _run_id(part)
    for record in part.records:
        for field in ("log_path", "timeline_path"):
            path = getattr(record, field)
            parts = Path(path).parts if path else ()
            if run_id in parts:
                inside = Path(*parts[len(parts) - parts[::-1].index(run_id):])
                setattr(record, field, os.path.relpath(here / inside, out))
