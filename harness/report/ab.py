"""The A/B release check: the same selection run on two engines, BASE and
CAND, compared check by check (`make ab`, `python -m harness report ab`).

Regressions come first, in the order a release manager acts on them: new
crashes, new failures, checks that no longer pass (skipped, unsupported, a
known issue, or not run on CAND), engine answers that changed, memory peaks
that rose beyond the threshold. Then the fixes: failures that pass, checks
that newly pass, memory peaks that fell. The comparison is diff_runs
(harness/report/diff.py) read with BASE as the old run.

A check whose engine did not start on either side gets no verdict: it is
neither a regression nor a fix, and is listed apart with the start-up
error; an A/B with such checks and no regression exits 4 (set-up), never 0.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.verdicts import Cause, Verdict
from harness.engines.startup import never_started, startup_error
from harness.report.diff import RunDiff, diff_runs, format_identity, format_unlike, unlike_reasons
from harness.report.format import first_line, gib
from harness.report.jinja import ENV
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.status import ExitStatus
from harness.results.store import write_text_atomic

# `python -m harness report ab` exits with this when CAND has any regression,
# and with the other where it has none but a side did not start for some check.
EXIT_REGRESSIONS = ExitStatus.FINDINGS
EXIT_NO_VERDICT = ExitStatus.USAGE
# Causes of an engine that died under the check.
CRASH_CAUSES = (Cause.ENGINE_DEAD.value, Cause.OOM.value, Cause.ILLEGAL_INSTRUCTION.value)
# The kinds of finding, in the order they are listed.
REGRESSION_KINDS = ("nothing compared", "incomplete run", "new crash", "new failure", "no longer passes", "output changed",
                    "memory up")
FIX_KINDS = ("fixed", "newly passes", "memory down")
# An answer's text in a finding's line; ab.html shows the whole outcome.
OUTCOME_CHARS = 160


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: str
    check: str
    base: str          # what BASE did, in a few words
    cand: str          # what CAND did
    detail: str = ""
    # For a changed answer: both sides' outcomes, shown as the engine gave them.
    base_output: Any = None
    cand_output: Any = None


@dataclasses.dataclass
class AbComparison:
    base: RunResults
    cand: RunResults
    diff: RunDiff
    regressions: list[Finding]
    fixes: list[Finding]
    still_failing: list[tuple[CheckRecord, CheckRecord]]  # (cand, base), failing alike on both
    no_verdict: list[Finding] = dataclasses.field(default_factory=list)  # a side's engine did not start

    @property
    def warnings(self) -> list[str]:
        """What limits the comparison: a BASE that did not finish cannot say
        what CAND lost; unreadable record lines may hide failures."""
        notes = [f"BASE run incomplete: {self.base.incompleteness}"] if not self.base.complete else []
        return notes + [f"{side}: {problem}" for side, run in (("BASE", self.base), ("CAND", self.cand))
                        for problem in run.problems]

    @property
    def not_like_for_like(self) -> list[str]:
        """The diff's reasons, naming the sides BASE and CAND."""
        return unlike_reasons(self.diff.identity, "BASE", "CAND")

    @property
    def exit_status(self) -> int:
        if self.regressions:
            return EXIT_REGRESSIONS
        return EXIT_NO_VERDICT if self.no_verdict else ExitStatus.OK


def compare_ab(base: RunResults, cand: RunResults, memory_pct: float = 10.0) -> AbComparison:
    unstarted = {r.id for run in (base, cand) for r in run.records if never_started(r)}
    diff = without(diff_runs(base, cand, memory_pct), unstarted)
    by_id = {r.id: r for r in cand.records}
    found: list[Finding] = []
    if not base.records:  # an empty selection must not pass as "no regressions"
        found.append(Finding("nothing compared", "BASE run", "no checks", f"{len(cand.records)} checks",
                             "BASE recorded no check: is SELECT right?"))
    if not cand.complete:
        found.append(Finding("incomplete run", "CAND run", "complete" if base.complete else "incomplete",
                             cand.incompleteness or "incomplete"))
    for record, was in diff.new_failures:
        found.append(Finding("new crash" if is_crash(record) else "new failure", record.id,
                             was or "not run", _verdict(record), first_line(record.message)))
    still = []
    for record, previous in diff.still_failing:
        if is_crash(record) and not is_crash(previous):
            found.append(Finding("new crash", record.id, _verdict(previous), _verdict(record),
                                 first_line(record.message)))
        else:
            still.append((record, previous))
    for previous in base.records:
        record = by_id.get(previous.id)
        if previous.id in unstarted:
            continue
        if previous.verdict == Verdict.PASS.value and (record is None or not (record.is_failure or _passed(record))):
            found.append(Finding("no longer passes", previous.id, "pass",
                                 "not run" if record is None else record.verdict or "error",
                                 "" if record is None else first_line(record.message)))
        elif record is not None and _passed(record) and previous.verdict in (Verdict.SKIP.value,
                                                                             Verdict.UNSUPPORTED.value):
            found.append(Finding("newly passes", record.id, previous.verdict or "error", "pass"))
    for change in diff.changed_outputs:
        found.append(Finding("output changed", change.check, _outcome_text(change.old),
                             _outcome_text(change.new), f"{change.run}: {change.what}",
                             change.old, change.new))
    for move in diff.memory_moves:
        found.append(Finding("memory up" if move.new > move.old else "memory down", move.check,
                             gib(move.old), gib(move.new), f"{move.series} {move.percent:+.1f}%"))
    found += [Finding("fixed", record.id, was, "pass") for record, was in diff.fixed]
    regressions = [f for kind in REGRESSION_KINDS for f in found if f.kind == kind]
    fixes = [f for kind in FIX_KINDS for f in found if f.kind == kind]
    return AbComparison(base, cand, diff, regressions, fixes, still, no_verdict(base, cand, unstarted))


def without(diff: RunDiff, checks: set[str]) -> RunDiff:
    """The diff with nothing said of these checks."""
    return dataclasses.replace(
        diff, new_failures=[(r, was) for r, was in diff.new_failures if r.id not in checks],
        fixed=[(r, was) for r, was in diff.fixed if r.id not in checks],
        still_failing=[(r, old) for r, old in diff.still_failing if r.id not in checks],
        memory_moves=[m for m in diff.memory_moves if m.check not in checks],
        changed_outputs=[c for c in diff.changed_outputs if c.check not in checks])


def no_verdict(base: RunResults, cand: RunResults, checks: set[str]) -> list[Finding]:
    """One finding per check whose engine did not start on a side, with what each side did."""
    sides = {name: {r.id: r for r in run.records} for name, run in (("BASE", base), ("CAND", cand))}

    def said(record: CheckRecord | None) -> str:
        if record is None:
            return "not run"
        return f"did not start: {startup_error(record).said}" if never_started(record) else _verdict(record)
    return [Finding("no verdict", check, said(sides["BASE"].get(check)), said(sides["CAND"].get(check)))
            for check in sorted(checks)]


def is_crash(record: CheckRecord) -> bool:
    """The engine died under the check: a crash cause, or a crash in its evidence."""
    kind = (record.cause or "").split(":", 1)[0]
    return kind in CRASH_CAUSES or "crash" in (record.evidence or {})


def _passed(record: CheckRecord) -> bool:
    return record.verdict == Verdict.PASS.value


def _verdict(record: CheckRecord) -> str:
    verdict = record.verdict or Verdict.ERROR.value
    return f"{verdict} [{record.cause}]" if record.cause else verdict


def _outcome_text(outcome: Any) -> str:
    """An engine outcome in one line: its text, or what happened instead."""
    if isinstance(outcome, dict):
        if "text" in outcome:
            text = repr(outcome["text"])
            return text if len(text) <= OUTCOME_CHARS else text[:OUTCOME_CHARS] + "…"
        if outcome.get("crashed"):
            return f"crashed ({outcome.get('cause')})"
        if "rejected" in outcome:
            return f"rejected ({outcome['rejected']}): {first_line(str(outcome.get('message', '')))}"
        if "timeout_s" in outcome:
            return f"timed out after {outcome['timeout_s']} s"
    return "none" if outcome is None else first_line(str(outcome))


def _side(results: RunResults) -> str:
    run = results.run
    return " ".join(str(part) for part in (run.get("run_id"), run.get("engine"), run.get("engine_version"),
                                           run.get("engine_python")) if part)


def format_ab(ab: AbComparison) -> str:
    """The comparison as plain text for a terminal or a CI log."""
    lines = [f"A/B: BASE {_side(ab.base)}", f"     CAND {_side(ab.cand)}", ""]
    lines += [f"warning: {note}" for note in ab.warnings]
    lines += format_identity(ab.diff.identity, "BASE", "CAND") + format_unlike(ab.not_like_for_like)

    def section(title: str, findings: list[Finding]) -> None:
        lines.extend(["", f"{title} ({len(findings)})"])
        width = max((len(f.kind) for f in findings), default=0)
        for f in findings:
            detail = f"  {f.detail}" if f.detail else ""
            lines.append(f"  {f.kind:{width}}  {f.check}  BASE {f.base} -> CAND {f.cand}{detail}")
        if not findings:
            lines.append("  none")

    section("REGRESSIONS", ab.regressions)
    section("Fixes", ab.fixes)
    section("No verdict: an engine did not start", ab.no_verdict)
    lines.extend(["", f"Failing on both ({len(ab.still_failing)})"])
    lines.extend(f"  {r.id}  {_verdict(r)}" for r, _ in ab.still_failing)
    verdict = (f"{len(ab.regressions)} regression(s) in CAND" if ab.regressions
               else f"no verdict on {len(ab.no_verdict)} check(s), no regressions in the others" if ab.no_verdict
               else "no regressions in CAND")
    lines.extend(["", f"A/B: {verdict}, {len(ab.fixes)} fix(es), memory threshold {ab.diff.memory_pct:g}%"])
    return "\n".join(lines) + "\n"


def render_ab(ab: AbComparison, out: Path) -> Path:
    """ab.html: the same comparison, one self-contained page."""
    page = ENV.get_template("ab.html.j2").render(
        ab=ab, base_side=_side(ab.base), cand_side=_side(ab.cand))
    write_text_atomic(out, page)
    return out
