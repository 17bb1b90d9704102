"""The harness's own time beside the engines', on one scenario family:
collection, records, the samplers, the report, and everything but engine
start-ups, requests and shutdowns. Goal: the harness's share at most 10% of
the run's wall time. Not part of `make test`; prints figures.

    .venv/bin/python benchmarks/bench_overhead.py [--family test_ragged_audio] [--model tiny-gemma4]

The family runs in its own pytest, as `make run` runs it, with
benchmarks/overhead_plugin.py timing the engine calls and the hooks.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE = ("engine start-up", "requests", "engine shutdown")
HARNESS_PARTS = ("collection", "records", "results and report")


def union_s(spans) -> float:
    """Seconds covered by any of the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def measure(family: str, model: str, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "overhead.json"
        env = {**os.environ, "MMHARNESS_OVERHEAD_OUT": str(out),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]))}
        run = subprocess.run([sys.executable, "-m", "pytest", f"scenarios/{family}.py", "-q", "-p", "overhead_plugin",
                              "--model", model, "--results-dir", str(Path(tmp) / "run"),
                              "--history", str(Path(tmp) / "history.jsonl"), *extra],
                             cwd=ROOT, env=env, capture_output=True, text=True)
        if not out.exists():
            raise SystemExit(f"the run wrote no figures (exit {run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
        figures = json.loads(out.read_text())
        figures["exit"] = run.returncode
        figures["summary"] = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
        return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="test_ragged_audio")
    ap.add_argument("--model", default="tiny-gemma4")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments, e.g. -k one_pass")
    args = ap.parse_args()
    figures = measure(args.family, args.model, args.pytest_args)
    spans, wall = figures["spans"], figures["wall_s"]
    engine = union_s([s for what in ENGINE for s in spans.get(what, [])])
    harness = wall - engine
    print(f"{args.family} on {args.model}: {figures['summary']} (exit {figures['exit']})")
    print(f"{'wall':>22}: {wall:8.1f} s")
    for what in ENGINE:
        print(f"{what:>22}: {union_s(spans.get(what, [])):8.1f} s  ({len(spans.get(what, []))} calls)")
    for what in HARNESS_PARTS:
        print(f"{what:>22}: {union_s(spans.get(what, [])):8.2f} s  ({len(spans.get(what, []))} calls)")
    other = harness - sum(union_s(spans.get(what, [])) for what in HARNESS_PARTS)
    print(f"{'other':>22}: {other:8.2f} s  (pytest's start, fixtures: media, model and adapter caches, "
          f"log slices, records' facts)")
    print(f"{'samplers':>22}: {figures['sampler_cpu_s']:8.2f} s of CPU, on their own threads")
    print(f"{'harness, all but engine':>22}: {harness:8.1f} s = {100 * harness / wall:.1f}% of the wall time "
          f"(goal <= 10%)")
    print(json.dumps({"family": args.family, "model": args.model, "wall_s": round(wall, 2),
                      "engine_s": round(engine, 2), "harness_s": round(harness, 2),
                      "harness_pct": round(100 * harness / wall, 2),
                      **{what: round(union_s(spans.get(what, [])), 3) for what in (*ENGINE, *HARNESS_PARTS)},
                      "sampler_cpu_s": round(figures["sampler_cpu_s"], 3)}))


if __name__ == "__main__":
    main()
