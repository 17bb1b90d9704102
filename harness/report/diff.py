"""Run-to-run diff: what broke, what was fixed, what still fails, which
memory peaks moved, and both runs' engine and host side by side."""
from __future__ import annotations

import dataclasses
from typing import Any

from harness.checks.verdicts import Verdict
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.units import GiB

# What a reader compares first when two runs disagree.
IDENTITY_FIELDS = ("run_id", "engine", "engine_version", "torch", "device", "python",
                   "harness_git_sha", "tier", "started")


@dataclasses.dataclass(frozen=True)
class MemoryMove:
    check: str
    series: str
    old: int
    new: int

    @property
    def percent(self) -> float:
        return 100.0 * (self.new - self.old) / self.old


@dataclasses.dataclass
class RunDiff:
    new_failures: list[tuple[CheckRecord, str | None]]  # (new record, old verdict or None)
    fixed: list[tuple[CheckRecord, str]]                  # (new record, old verdict)
    still_failing: list[tuple[CheckRecord, CheckRecord]]  # (new, old)
    memory_moves: list[MemoryMove]
    memory_pct: float
    identity: list[tuple[str, Any, Any]]                  # (field, old, new)


def diff_runs(old: RunResults, new: RunResults, memory_pct: float = 10.0) -> RunDiff:
    before = {r.id: r for r in old.records}
    new_failures, fixed, still_failing, moves = [], [], [], []
    for record in new.records:
        previous = before.get(record.id)
        if record.is_failure:
            if previous is not None and previous.is_failure:
                still_failing.append((record, previous))
            else:
                new_failures.append((record, previous.verdict if previous else None))
        elif (record.verdict == Verdict.PASS.value and previous is not None
              and (previous.is_failure or previous.verdict == Verdict.KNOWN_ISSUE.value)):
            fixed.append((record, previous.verdict))
        if previous is not None:
            moves.extend(_memory_moves(previous, record, memory_pct))
    moves.sort(key=lambda m: -abs(m.percent))
    identity = [(key, old.run.get(key), new.run.get(key)) for key in IDENTITY_FIELDS]
    identity.append(("host", _host(old.run), _host(new.run)))
    return RunDiff(new_failures, fixed, still_failing, moves, memory_pct, identity)


def _memory_moves(old: CheckRecord, new: CheckRecord, pct: float) -> list[MemoryMove]:
    moves = []
    for series, new_peak in new.peak_memory.items():
        old_peak = old.peak_memory.get(series)
        if old_peak and abs(100.0 * (new_peak - old_peak) / old_peak) > pct:
            moves.append(MemoryMove(new.id, series, int(old_peak), int(new_peak)))
    return moves


def _host(run: dict[str, Any]) -> str:
    gpus = [g for g in run.get("gpus") or [] if "name" in g]
    if gpus:
        return ", ".join(f"{g['name']} ({g['memory_bytes'] / GiB:.0f} GiB, driver {g['driver']})"
                         for g in gpus)
    return run.get("cpu_model") or "unknown"


def format_diff(diff: RunDiff) -> str:
    """The diff as plain text for a terminal or a CI log."""
    key_width = max(len(key) for key, _, _ in diff.identity)
    old_width = max(len("OLD"), *(len(_text(old)) for _, old, _ in diff.identity))
    lines = ["Engine and host (≠ where the runs differ)", "",
             f"    {'':{key_width}}  {'OLD':{old_width}}  NEW"]
    for key, old, new in diff.identity:
        mark = "  " if old == new else "≠ "
        lines.append(f"  {mark}{key:{key_width}}  {_text(old):{old_width}}  {_text(new)}")

    def section(title: str, entries: list[str]) -> None:
        lines.extend(["", f"{title} ({len(entries)})"])
        lines.extend(f"  {entry}" for entry in entries)
        if not entries:
            lines.append("  none")

    section("New failures", [f"{r.id}  {r.verdict} [{r.cause}] {_first_line(r.message)}"
                             f"  (was {was or 'not run'})" for r, was in diff.new_failures])
    section("Fixed", [f"{r.id}  (was {was})" for r, was in diff.fixed])
    section("Still failing", [f"{r.id}  {r.verdict} [{r.cause}] {_first_line(r.message)}"
                              for r, _ in diff.still_failing])
    section(f"Memory peaks moved by more than {diff.memory_pct:g}%",
            [f"{m.check}  {m.series}  {m.old / GiB:.2f} GiB -> {m.new / GiB:.2f} GiB "
             f"({m.percent:+.1f}%)" for m in diff.memory_moves])
    return "\n".join(lines) + "\n"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return " / ".join(map(str, value))
    return str(value)


def _first_line(message: str) -> str:
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return line[:160]
