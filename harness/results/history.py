"""The append-only history of runs, one summary line per run, so the report
can say for each failing check since which run it has failed (for the same
cause), and `--shard` can plan from each check's last known seconds."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from harness.verdicts import Verdict
from harness.files import read_json_lines
from harness.results.run import RunResults

NOT_PASSING = (Verdict.FAIL.value, Verdict.ERROR.value, Verdict.KNOWN_ISSUE.value, Verdict.UNSUPPORTED.value)


def history_entry(run_id: str, results: RunResults) -> dict[str, Any]:
    run = results.run
    return {
        "run_id": run_id,
        "started": run.get("started"),
        "finished": run.get("finished"),
        "tier": run.get("tier"),
        "engine": run.get("engine"),
        "engine_version": run.get("engine_version"),
        "harness_git_sha": run.get("harness_git_sha"),
        "counts": results.counts,
        # A run cut short says so, and why: the checks it never reached
        # did not pass.
        "complete": results.complete,
        **({} if results.complete else {"incomplete_reason": results.incompleteness}),
        # Only what did not pass is kept, with its cause ("failing since"
        # restarts when the cause changes), which keeps a line small.
        "not_passing": {r.id: r.verdict for r in results.records if r.verdict in NOT_PASSING},
        "causes": {r.id: r.cause for r in results.records if r.verdict in NOT_PASSING and r.cause},
        # Checks whose failure did not come back on a rerun, with the first
        # attempt's cause: how often a check is flaky is counted from these.
        "flaky": {r.id: r.cause for r in results.flaky},
        # What ran and did not pass either: with not_passing, what passed.
        "skipped": [r.id for r in results.records if r.verdict == Verdict.SKIP.value],
        "files": sorted({_file(r.id) for r in results.records}),
        # Every check recorded, with its seconds (setup, call and teardown:
        # engine starts included), nested by file and test function so the
        # ids' common parts are written once. Shards are planned from these,
        # and they tell a check that passed from one that did not run.
        "durations": _durations_nested(results),
    }


def _durations_nested(results: RunResults) -> dict[str, dict[str, dict[str, float]]]:
    """{file: {function: {parameters ("" for none): seconds}}}"""
    nested: dict[str, dict[str, dict[str, float]]] = {}
    for record in results.records:
        file, _, rest = record.id.partition("::")
        function, params = (rest[:rest.index("[")], rest[rest.index("[") + 1:-1]) \
            if rest.endswith("]") and "[" in rest else (rest, "")
        nested.setdefault(file, {}).setdefault(function, {})[params] = round(record.seconds, 1)
    return nested


def check_durations(entry: dict[str, Any]) -> dict[str, float]:
    """A history line's seconds per check id ({} for a line from before the field)."""
    return {_check_id(file, function, params): seconds
            for file, functions in (entry.get("durations") or {}).items()
            for function, checks in functions.items() for params, seconds in checks.items()}


def _check_id(file: str, function: str, params: str) -> str:
    rest = f"{function}[{params}]" if params else function
    return f"{file}::{rest}" if rest else file


def passed_last_time(entries: list[dict[str, Any]], tier: str | None, checks: set[str]) -> set[str]:
    """Those of `checks` that passed in the newest run of `tier` that ran
    them (lines from before skips were kept tell nothing)."""
    passed: set[str] = set()
    left = set(checks)
    for entry in sorted(entries, key=lambda e: e.get("started") or "", reverse=True):
        if entry.get("tier") != tier or not left:
            continue
        ran = left & set(check_durations(entry))
        if "skipped" in entry:
            passed |= ran - set(entry.get("not_passing", {})) - set(entry["skipped"])
        left -= ran
    return passed


def last_durations(entries: list[dict[str, Any]], tier: str | None) -> dict[str, float]:
    """Each check's seconds in the newest run of `tier` that recorded it."""
    known: dict[str, float] = {}
    for entry in sorted(entries, key=lambda e: e.get("started") or "", reverse=True):
        if entry.get("tier") == tier:
            for check, seconds in check_durations(entry).items():
                known.setdefault(check, seconds)
    return known


def append_history(path: Path, entry: dict[str, Any]) -> None:
    """Append one line and fsync it. A run already in the history is not
    added twice, so re-rendering a run does not lengthen a streak."""
    if any(e.get("run_id") == entry["run_id"] for e in read_history(path).entries):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    with open(path, "a+b") as f:
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                # An append killed mid-line left no newline: end that line
                # first, so this entry is not glued to it.
                line = b"\n" + line
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


@dataclasses.dataclass
class History:
    entries: list[dict[str, Any]]
    problems: list[str]


def read_history(path: Path) -> History:
    if not path.exists():
        return History([], [])
    lines = read_json_lines(path.read_bytes())
    entries = [entry for _, entry in lines.values if isinstance(entry, dict) and "run_id" in entry]
    bad = lines.bad + [(number, "not a run summary") for number, entry in lines.values
                       if not (isinstance(entry, dict) and "run_id" in entry)]
    problems = [f"{path}:{number}: unreadable history line ({why})" for number, why in sorted(bad)]
    if lines.unfinished:
        problems.append(f"{path}:{lines.unfinished_line}: unfinished history line ({len(lines.unfinished)} bytes, no newline)")
    return History(entries, problems)


@dataclasses.dataclass(frozen=True)
class Streak:
    since_run: str
    since_started: str | None
    runs: int  # consecutive runs, this one included


def failing_since(entries: list[dict[str, Any]], run_id: str) -> dict[str, Streak]:
    """For each check not passing in `run_id`, the oldest run of its unbroken
    streak of not passing for the same cause: a check that failed on a
    mismatch and now crashes has a new problem, whose streak starts when
    the cause changed. Only runs of the same tier count: a CPU run and a
    GPU run of the same check are different evidence; runs that did not
    include the check (another shard's, another selection) are passed over."""
    upto, ran = _tier_upto(entries, run_id)
    if not upto:
        return {}
    current = upto[-1]
    streaks = {}
    for check in current.get("not_passing", {}):
        cause = _cause(current, check)
        since, runs = current, 0
        for entry in reversed(upto):
            if check in entry.get("not_passing", {}):
                if _cause(entry, check) not in (cause, UNKNOWN):
                    break  # it failed for another reason there: a new streak began after
                since, runs = entry, runs + 1
            elif _ran(entry, check, ran):
                break  # it ran and passed (or was skipped) there
            # else that run did not include the check (another shard's, or
            # another selection): it neither breaks nor lengthens the streak
        streaks[check] = Streak(since["run_id"], since.get("started"), runs)
    return streaks


@dataclasses.dataclass(frozen=True)
class FlakyCount:
    flaky: int  # runs in which the check was flaky, this one included
    ran: int    # runs that ran the check (lines from before durations were kept: those of its file)


def flaky_counts(entries: list[dict[str, Any]], run_id: str) -> dict[str, FlakyCount]:
    """For each check flaky in `run_id`, how many runs of its tier up to
    this one it was flaky in, of those that ran it: a check flaky once in
    fifty runs is not one flaky every other run."""
    upto, ran = _tier_upto(entries, run_id)
    if not upto:
        return {}
    return {check: FlakyCount(sum(check in (e.get("flaky") or {}) for e in upto),
                              sum(_ran(e, check, ran) for e in upto))
            for check in upto[-1].get("flaky") or {}}


def _tier_upto(entries: list[dict[str, Any]], run_id: str) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """The runs of `run_id`'s tier up to it, oldest first (none when it is
    not in the history), and the checks each ran, by run id."""
    ordered = sorted(entries, key=lambda e: e.get("started") or "")
    current = next((e for e in reversed(ordered) if e["run_id"] == run_id), None)
    if current is None:
        return [], {}
    same_tier = [e for e in ordered if e.get("tier") == current.get("tier")]
    upto = same_tier[: same_tier.index(current) + 1]
    return upto, {entry["run_id"]: set(check_durations(entry)) for entry in upto if "durations" in entry}


# The cause of a line from before causes were kept: it breaks no streak.
UNKNOWN = object()


def _cause(entry: dict[str, Any], check: str) -> Any:
    return entry["causes"].get(check) if "causes" in entry else UNKNOWN


def _ran(entry: dict[str, Any], check: str, ran: dict[str, set[str]]) -> bool:
    if entry["run_id"] in ran:
        return check in ran[entry["run_id"]]
    return _file(check) in entry.get("files", ())  # a line from before durations were kept


def _file(check_id: str) -> str:
    return check_id.split("::", 1)[0]
