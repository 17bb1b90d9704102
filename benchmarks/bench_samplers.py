"""Benchmark of the memory samplers: achieved rate and CPU cost per sampler
(goal: 100 Hz at under 2% of one core), and whether a transient peak of
known size held for 20 ms is caught.

    .venv/bin/python benchmarks/bench_samplers.py [--seconds 5] [--rate 100] [--trials 20]

Host: HostSampler on a process tree shaped like an engine (a root and four
workers), against the naive way (psutil children(recursive=True) and
memory_info per tick) timed the same way; the slowdown of a pure-Python
loop in the sampling process itself (the in-process engine case, where the
sampler competes for the GIL); and a child's RSS transient. GPU, when NVML
and CUDA are present: NvmlSampler's cost and a torch allocation transient.
CPU cost is the sampler's threads' own CPU time over wall time.

Every core busy (`--busy-seconds`, 0 skips it): the tiny Gemma4 at TP =
cores with its ranks bound one group of cores each, as the CPU tier runs TP
2, answering batches the whole time; the HostSampler on its process tree at
normal priority and as it runs (its threads ahead of the engine's),
alternating, with the engine's batches per second beside each. Goal: >= 100
Hz at < 2% of a core.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil

from harness.memory.nvml import nvml_unavailable_reason
from harness.memory.samplers import ENGINE_RSS, HostSampler, NvmlSampler, Sampler, used_series

MB = 1_000_000
HOLD_S = 0.020

TREE = textwrap.dedent("""
    import subprocess, sys, time
    kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(4)]
    print("up", flush=True)
    sys.stdin.read()
    for k in kids: k.kill()
""")

# Allocates `size` bytes (touching every page), holds them HOLD_S, frees;
# prints the monotonic instants the memory was fully there and released.
TRANSIENT = textwrap.dedent("""
    import json, sys, time
    size, hold, trials = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    print("up", flush=True)
    sys.stdin.readline()
    spans = []
    for _ in range(trials):
        block = b"\\1" * size
        t0 = time.monotonic(); time.sleep(hold); t1 = time.monotonic()
        del block
        spans.append((t0, t1))
        time.sleep(0.1)
    print(json.dumps(spans), flush=True)
""")


class NaiveHostSampler(Sampler):
    """The way not to do it, for comparison: walk the tree every tick."""
    name = "naive-psutil"

    def __init__(self, root_pid: int, rate_hz: float):
        super().__init__(rate_hz=rate_hz)
        self.root = psutil.Process(root_pid)

    def _read(self):
        total = 0
        for p in [self.root, *self.root.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return {ENGINE_RSS: total}


def run_for(sampler: Sampler, seconds: float):
    sampler.start()
    time.sleep(seconds)
    return sampler.stop()


def busy_loop(n: int = 3_000_000) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t


def gil_slowdown(rate: float, repeats: int = 7) -> tuple[float, float]:
    """Relative slowdown of a pure-Python loop while a sampler runs in the
    same process, and the same figure with no sampler (the noise floor):
    medians over interleaved paired runs."""
    with_sampler, without = [], []
    for _ in range(repeats):
        alone = busy_loop()
        without.append(busy_loop() / alone - 1)
        sampler = HostSampler(psutil.Process().pid, rate_hz=rate).start()
        with_sampler.append(busy_loop() / alone - 1)
        sampler.stop()
    return statistics.median(with_sampler), statistics.median(without)


def cost_row(result) -> dict:
    return {"sampler": result.sampler, "target_hz": result.rate_hz,
            "achieved_hz": round(result.achieved_hz, 1),
            "cpu_pct_of_core": round(100 * result.cpu_fraction, 3),
            "cpu_us_per_tick": round(1e6 * result.cpu_seconds / max(result.ticks, 1), 1)}


def host_cost(seconds: float, rate: float) -> list[dict]:
    tree = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    tree.stdout.readline()
    try:
        rows = [cost_row(run_for(HostSampler(tree.pid, rate_hz=rate), seconds)),
                cost_row(run_for(NaiveHostSampler(tree.pid, rate), seconds))]
    finally:
        tree.stdin.close()
        tree.wait()
    rows[0]["tree_processes"] = 5
    return rows


def host_transient(rate: float, size: int, trials: int) -> dict:
    child = subprocess.Popen([sys.executable, "-c", TRANSIENT, str(size), str(HOLD_S), str(trials)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    sampler = HostSampler(child.pid, rate_hz=rate).start()
    base = sampler.window(*[sampler.mark("base")] * 2).peak[ENGINE_RSS]
    child.stdin.write("go\n")
    child.stdin.flush()
    spans = json.loads(child.stdout.readline())
    result = sampler.stop()
    child.wait()
    return caught_row("host RSS", size, spans, result, ENGINE_RSS, base)


def caught_row(what: str, size: int, spans, result, key: str, base: int) -> dict:
    caught = 0
    for t0, t1 in spans:
        peak = result.window(t0, t1).peak.get(key, 0)
        caught += peak - base >= 0.9 * size
    return {"transient": what, "size_mb": size / MB, "hold_ms": HOLD_S * 1000,
            "caught": caught, "trials": len(spans), "achieved_hz": round(result.achieved_hz, 1)}


def busy_engine_section(seconds: float, rounds: int = 2) -> list[dict]:
    """The HostSampler on an engine that binds every core, at normal
    priority and raised, alternating; each row with the engine's pace."""
    import tempfile

    from _tiny import tiny_gemma4

    from harness.engines.base import Sampling
    from harness.engines.offline import OfflineEngine
    from harness.engines.parallel import placement
    from harness.workloads.chat import user

    interpreter, entry, model = tiny_gemma4()
    tp = len(psutil.Process().cpu_affinity())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = OfflineEngine(model, {**entry.engine_args, "tensor_parallel_size": tp}, interpreter,
                               Path(tmp) / "engine.log", env=placement(tp, "cpu")).start()
        batches, stop = [0], threading.Event()

        def load():
            while not stop.is_set():
                engine.chat([user(f"Tell a story, {i}.") for i in range(4)], Sampling(max_tokens=64, ignore_eos=True))
                batches[0] += 1

        driver = threading.Thread(target=load, daemon=True)
        driver.start()
        try:
            for _ in range(rounds):
                for raised in (False, True):
                    sampler = HostSampler(engine.proc.popen.pid)
                    sampler.raise_priority = raised
                    before = batches[0]
                    row = cost_row(run_for(sampler, seconds))
                    rows.append({**row, "sampler": f"host, TP {tp} busy", "priority": sampler._meta["priority"],
                                 "engine_batches_per_s": round((batches[0] - before) / seconds, 2)})
        finally:
            stop.set()
            driver.join(120)
            engine.close()
    return rows


def gpu_section(seconds: float, rate: float, trials: int) -> list[dict] | str:
    reason = nvml_unavailable_reason()
    if reason:
        return reason
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    torch.cuda.init()
    me = psutil.Process().pid
    rows: list[dict] = [cost_row(run_for(NvmlSampler(devices=[0], rate_hz=rate), seconds)),
                        cost_row(run_for(NvmlSampler(me, devices=[0], rate_hz=rate), seconds))]
    rows[0]["sampler"], rows[1]["sampler"] = "nvml (device only)", "nvml (+ per-process)"
    size = 1 << 30
    sampler = NvmlSampler(devices=[0], rate_hz=rate).start()
    base = sampler.window(*[sampler.mark("base")] * 2).peak[used_series(0)]
    spans = []
    for _ in range(trials):
        block = torch.empty(size, dtype=torch.uint8, device="cuda:0")
        torch.cuda.synchronize()
        t0 = time.monotonic()
        time.sleep(HOLD_S)
        t1 = time.monotonic()
        del block
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        spans.append((t0, t1))
        time.sleep(0.1)
    result = sampler.stop()
    rows.append(caught_row("GPU torch allocation", size, spans, result, used_series(0), base))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--busy-seconds", type=float, default=20.0,
                    help="seconds per sampler on an engine binding every core (0: skip; the engine starts in ~35 s)")
    args = ap.parse_args()

    figures: dict = {"cpu_cores": psutil.cpu_count(), "load_avg_1m": round(psutil.getloadavg()[0], 2)}
    figures["host_cost"] = host_cost(args.seconds, args.rate)
    slowdown, noise = gil_slowdown(args.rate)
    figures["in_process_slowdown_pct"] = round(100 * slowdown, 2)
    figures["in_process_noise_pct"] = round(100 * noise, 2)
    figures["host_transient"] = host_transient(args.rate, 100 * MB, args.trials)
    figures["gpu"] = gpu_section(args.seconds, args.rate, args.trials)
    figures["busy"] = busy_engine_section(args.busy_seconds) if args.busy_seconds > 0 else []

    print(f"{'machine':>22}: {figures['cpu_cores']} cores, load average {figures['load_avg_1m']}")
    for row in figures["host_cost"]:
        print(f"{row['sampler']:>22}: {row['achieved_hz']:7.1f} Hz achieved of {row['target_hz']:.0f}, "
              f"{row['cpu_pct_of_core']:6.3f}% of a core, {row['cpu_us_per_tick']:7.1f} us CPU/tick")
    print(f"{'in-process slowdown':>22}: {figures['in_process_slowdown_pct']:+.2f}% on a pure-Python "
          f"loop; {figures['in_process_noise_pct']:+.2f}% with no sampler (noise floor)")
    t = figures["host_transient"]
    print(f"{'host transient':>22}: {t['caught']}/{t['trials']} caught ({t['size_mb']:.0f} MB held "
          f"{t['hold_ms']:.0f} ms)")
    for row in figures["busy"]:
        print(f"{row['sampler']:>22}: {row['achieved_hz']:7.1f} Hz achieved of {row['target_hz']:.0f}, "
              f"{row['cpu_pct_of_core']:6.3f}% of a core, priority {row['priority']}; "
              f"engine {row['engine_batches_per_s']:.2f} batches/s")
    if isinstance(figures["gpu"], str):
        print(f"{'gpu':>22}: skipped: {figures['gpu']}")
    else:
        for row in figures["gpu"]:
            print(f"{'gpu':>22}: {json.dumps(row)}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
