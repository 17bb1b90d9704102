"""Benchmark of the report for a run of 1,000 checks: how long generating
the page takes, how big it is, and how long headless Chromium takes to
render it beyond a blank page.

    .venv/bin/python benchmarks/bench_report.py [--checks 1000] [--keep DIR]

The synthetic run is written the way the pytest plugin writes a real one:
records through the store, each with its 400-point memory timeline and,
for failures, the log tail. That recording cost is printed apart, since a
real run pays it in the workers while the checks run. Every check's detail
(HTML) and chart data are made with the page, so they count in its time;
the charts themselves are drawn by the browser (uPlot) when shown.
"""
from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness.verdicts import Cause
from harness.report.html import render_report
from harness.results.merge import merge_run
from harness.results.record import CheckRecord, record_log_tail
from harness.results.store import RecordWriter, RunLayout
from harness.units import GiB

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# A nightly run's mix: mostly passes, a few failures of each kind.
MIX = [("pass", 0.935), ("skip", 0.03), ("fail", 0.02), ("known issue", 0.01), ("error", 0.005)]
CAUSES = [c.value for c in (Cause.OOM, Cause.MISMATCH, Cause.ENGINE_DEAD, Cause.TIMEOUT, Cause.LEAK,
                             Cause.HTTP_5XX)]


def write_run(run_dir: Path, checks: int, seed: int = 0) -> float:
    """Write a synthetic run's records; return the seconds spent recording."""
    rng = random.Random(seed)
    layout = RunLayout(run_dir)
    writers = [RecordWriter(layout, f"gw{i}") for i in range(2)]
    logs = run_dir / "logs"
    logs.mkdir(parents=True)
    verdicts = [v for v, share in MIX for _ in range(round(share * checks))]
    verdicts += ["pass"] * (checks - len(verdicts))
    rng.shuffle(verdicts)
    spent = 0.0
    for i, verdict in enumerate(verdicts):
        family = rng.choice(["audio_ragged", "image_batch", "video_frames", "lora_swap", "prefix_cache"])
        budget = 22 * GiB
        level = rng.uniform(4, 20) * GiB
        # 60 s at 10 Hz, thinned by half (the engines plugin keeps at most 400).
        ticks = range(0, 600, 2)
        timeline = {"t": [s / 10 for s in ticks], "series": {
            "cuda:0": [int(level * min(1, s / 120) + rng.uniform(0, 0.3) * GiB) for s in ticks],
            "engine-rss": [int(3 * GiB + s * 1e6) for s in ticks]}}
        log = logs / f"{i}.log"
        log.write_text("".join(f"INFO engine step {n} <ok>\n" for n in range(200)))
        failing = verdict in ("fail", "error", "known issue")
        record = CheckRecord(
            id=f"scenarios/test_{family}.py::test_check[{i}-bf16-<b>]", family=family,
            params={"i": i, "dtype": "bf16"}, tier="gpu", engine="vllm", engine_version="0.9.2",
            model="tiny-llava", verdict=verdict,
            cause=rng.choice(CAUSES) if failing else None,
            message=f"output diverged at token {i % 40}: <script>alert({i})</script>" if failing else "",
            divergence={"position": i % 40, "expected": "the cat", "actual": "the dog"} if failing else None,
            outputs=f"A photo of {rng.choice(['a cat', 'two dogs', '<img src=x onerror=alert(1)>'])}. " * 8,
            durations={"setup": 0.01, "call": rng.uniform(0.5, 30), "teardown": 0.01},
            memory_budget={"cuda:0": budget}, memory_timeline=timeline,
            peak_memory={name: max(values) for name, values in timeline["series"].items()},
            log_path=str(log), worker=f"gw{i % 2}")
        started = time.perf_counter()
        if failing:
            record.log_tail = record_log_tail(log)
        writers[i % 2].append(record)
        spent += time.perf_counter() - started
    for writer in writers:
        writer.close()
    return spent


def dump_dom_seconds(url: str) -> float:
    with tempfile.TemporaryDirectory() as profile:
        started = time.perf_counter()
        subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                       check=True, capture_output=True, timeout=120)
        return time.perf_counter() - started


def render_beyond_blank(blank: str, page: str, pairs: int = 7) -> tuple[float, float, float]:
    """Median blank time, median page time and median of the paired
    differences; blank and page alternate so machine noise hits both."""
    blanks, pages = [], []
    for _ in range(pairs):
        blanks.append(dump_dom_seconds(blank))
        pages.append(dump_dom_seconds(page))
    beyond = statistics.median(p - b for p, b in zip(pages, blanks))
    return statistics.median(blanks), statistics.median(pages), beyond


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checks", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="write the run here and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    run_dir = base / "run-bench"
    shutil.rmtree(run_dir, ignore_errors=True)

    recording = write_run(run_dir, args.checks)
    layout = RunLayout(run_dir)
    started = time.perf_counter()
    results = merge_run(layout, {"run_id": run_dir.name, "engine": "vllm", "engine_version": "0.9.2"},
                        incomplete=None)
    merged = time.perf_counter()
    render_report(results, layout.report_html)
    rendered = time.perf_counter()
    size = layout.report_html.stat().st_size
    failures = sum(1 for r in results.records if r.verdict not in ("pass", "skip"))

    print(f"checks: {len(results.records)} ({failures} with a detail in the failures section)")
    print(f"recording (records and log tails; paid in the workers during the run): "
          f"{recording:.2f} s")
    print(f"page generation: {rendered - started:.3f} s "
          f"(merge {merged - started:.3f} s + render {rendered - merged:.3f} s)")
    print(f"page size: {size / 2**20:.2f} MiB")
    if Path(CHROMIUM).exists():
        blank = base / "blank.html"
        blank.write_text("<!doctype html><title>blank</title>")
        blank_s, page_s, beyond = render_beyond_blank(blank.as_uri(), layout.report_html.as_uri())
        print(f"chromium --dump-dom: blank {blank_s:.3f} s, report {page_s:.3f} s, "
              f"beyond blank {beyond:.3f} s (medians of 7 alternating runs)")
    else:
        print(f"chromium: {CHROMIUM} not found, render time not measured")
    if args.keep:
        print(f"kept: {layout.report_html}")
    else:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
