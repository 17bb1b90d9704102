"""Command line of the harness's results: `python -m harness report ...`.

  report diff OLD NEW        what broke, was fixed, still fails; memory moves
  report ab BASE CAND        the A/B release check: CAND's regressions against
                             BASE first, then its fixes; writes ab.html
  report render RUN_DIR      merge a run's records (a killed run's too, marked
                             incomplete) and write its report.html
  report summary RUN_DIR     the one-line summary and the report's path
  report merge DIR... -o OUT join a run's shards (--shard I/N): results.json,
                             report.html and JUnit XML

Exit statuses are harness.results.status.ExitStatus: diff exits 1 when the
new run has new failures, render, summary and merge give the run's own
status.
"""
from __future__ import annotations

import argparse
import datetime as dt
import sys
import traceback
from pathlib import Path

from harness.report.ab import compare_ab, format_ab, render_ab
from harness.report.diff import diff_runs, format_diff
from harness.report.html import render_report
from harness.report.shard_merge import merge_shard_runs
from harness.report.summary import print_run_summary
from harness.results.history import append_history, failing_since, history_entry, read_history
from harness.results.merge import merge_run
from harness.results.metadata import collect_host_metadata
from harness.results.run import ResultsError, load_results
from harness.results.status import ExitStatus, describe, failures_status, run_status
from harness.results.store import RunLayout

REPO = Path(__file__).resolve().parents[1]
KILLED = "killed before it finished"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(ExitStatus.USAGE, f"{self.prog}: error: {message}\n")  # argparse's own is 2: interrupted here


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m harness")
    commands = parser.add_subparsers(dest="group", required=True)
    report = commands.add_parser("report", help="results and report of runs").add_subparsers(
        dest="command", required=True)

    diff = report.add_parser("diff", help="compare two runs")
    diff.add_argument("old", type=Path, help="baseline run directory or its results.json")
    diff.add_argument("new", type=Path, help="later run directory or its results.json")
    diff.add_argument("--memory-diff-pct", type=float, default=10.0,
                      help="list memory peaks that moved by more than this percentage (default 10)")

    ab = report.add_parser("ab", help="the A/B release check: CAND's regressions against BASE, then fixes")
    ab.add_argument("base", type=Path, help="BASE run directory or its results.json")
    ab.add_argument("cand", type=Path, help="CAND run directory or its results.json")
    ab.add_argument("-o", "--output", type=Path, help="directory for ab.html (default: CAND's run directory)")
    ab.add_argument("--memory-diff-pct", type=float, default=10.0,
                    help="memory peaks that moved by more than this percentage are listed (default 10)")

    render = report.add_parser("render", help="merge a run's records and write its report.html")
    render.add_argument("run_dir", type=Path)
    render.add_argument("--baseline", type=Path, help="earlier run to diff against")
    render.add_argument("--history", type=Path, default=REPO / "reports" / "history.jsonl")
    render.add_argument("--append-history", action="store_true",
                        help="add this run to the history (a run the plugin finished is there already)")
    render.add_argument("--memory-diff-pct", type=float, default=10.0)
    render.add_argument("-o", "--output", type=Path, help="default: RUN_DIR/report.html")

    summary = report.add_parser("summary", help="print a run's one-line summary and report path")
    summary.add_argument("run_dir", type=Path)

    merge = report.add_parser("merge", help="join a run's shards into one results.json, report and JUnit XML")
    merge.add_argument("inputs", type=Path, nargs="+", metavar="DIR", help="shard run directories or results.json")
    merge.add_argument("-o", "--output", type=Path, help="directory to write (default: reports/merged-<time>)")
    merge.add_argument("--history", type=Path,
                       help="add each shard's history line here, and count 'failing since' from it")

    args = parser.parse_args(argv)
    try:
        status = COMMANDS[args.command](args)
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        status = ExitStatus.USAGE
    except Exception:  # an uncaught one would exit 1, which means new findings
        traceback.print_exc()
        status = ExitStatus.HARNESS_ERROR
    if status:
        print(f"mmharness: exit status {describe(status)}", file=sys.stderr)
    return status


def _diff(args: argparse.Namespace) -> int:
    diff = diff_runs(load_results(args.old), load_results(args.new), args.memory_diff_pct)
    print(format_diff(diff), end="")
    return failures_status([record for record, _ in diff.new_failures])


def _ab(args: argparse.Namespace) -> int:
    base, cand = load_results(args.base), load_results(args.cand)
    comparison = compare_ab(base, cand, args.memory_diff_pct)
    out = render_ab(comparison, (args.output or cand.path.parent) / "ab.html")
    print(format_ab(comparison), end="")
    print(f"A/B report: {out}")
    return comparison.exit_status


def _render(args: argparse.Namespace) -> int:
    layout = RunLayout(args.run_dir.resolve())
    baseline = load_results(args.baseline) if args.baseline else None
    if layout.records_dir.is_dir():
        # The records are the source of truth: merge them again, keeping the
        # metadata the run wrote. A run with no results.json of its own was
        # killed before its end: take the host's metadata, and say so.
        if layout.results_json.exists():
            previous = load_results(layout.results_json)
            metadata = previous.run
            incomplete = None if previous.complete else previous.run.get("incomplete_reason") or KILLED
        else:
            metadata = {"run_id": layout.run_dir.name, **collect_host_metadata(REPO),
                        "merged": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            incomplete = KILLED
        results = merge_run(layout, metadata, incomplete=incomplete)
    else:
        results = load_results(layout.results_json)
    run_id = results.run.get("run_id", layout.run_dir.name)
    if args.append_history:
        append_history(args.history, history_entry(run_id, results))
    history = read_history(args.history)
    out = args.output or layout.report_html
    render_report(results, out, baseline=baseline, streaks=failing_since(history.entries, run_id),
                  history_problems=history.problems, memory_pct=args.memory_diff_pct)
    for problem in results.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print_run_summary(results, out)
    return run_status(results)


def _summary(args: argparse.Namespace) -> int:
    results = load_results(args.run_dir)
    print_run_summary(results, RunLayout(args.run_dir).report_html)
    return run_status(results)


def _merge(args: argparse.Namespace) -> int:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    merged = merge_shard_runs(args.inputs, args.output or REPO / "reports" / f"merged-{stamp}", args.history)
    for problem in merged.results.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print_run_summary(merged.results, merged.report)
    print(f"mmharness: junit: {', '.join(map(str, merged.junit))}")
    return run_status(merged.results)


COMMANDS = {"diff": _diff, "ab": _ab, "render": _render, "summary": _summary, "merge": _merge}

if __name__ == "__main__":
    sys.exit(main())
