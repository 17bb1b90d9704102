"""Engine start time (offline, server) and time-to-verdict after SIGKILL of
the engine core, over N runs each; and the start of a reference engine in
one process (harness.engines.parallel.reference_layout). Not part of `make test`; prints figures.

Goal: time-to-verdict under 2 s, where a plain openai client would wait out
its 600 s default timeout.

--phases: where each start's time went (benchmarks/start_phases.py), the
median of each phase over the runs, and each process's `import vllm` alone
in a fresh interpreter, for what the imports of the three processes cost.
--together: the wall time of 1, 2 and 3 offline starts begun at once (what
a start ahead beside another costs: harness/schedule/ahead.py).
usage: python benchmarks/bench_engines.py [--runs 5] [--phases] [--together]
"""
import argparse
import concurrent.futures
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _tiny import tiny_gemma4
from start_phases import PHASES, phases

from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.offline import OfflineEngine
from harness.engines.parallel import placement, reference_layout, threads_in_process
from harness.engines.server import ServerEngine
from harness.workloads.chat import user


def one_run(cls, model, args, interp, log, timings=None):
    t0, launched = time.monotonic(), time.time()
    eng = cls(model, args, interp, log).start()
    start_s = time.monotonic() - t0
    if timings is not None:
        timings.append(phases(log, launched, time.time()))
    results, verdict_s = kill_core_during(eng, [user(f"long {i}") for i in range(4)],
                                          Sampling(max_tokens=1500))
    assert not results[0].ok, "the engine answered although its core was killed"
    assert eng.close() == []
    return start_s, verdict_s


def reference_start(model, args, interp, log) -> float:
    """A TP 1 reference's start in one process, its environment as the
    runner and the pool give it."""
    env = placement(1, "cpu") | reference_layout("cpu", 1)
    t0 = time.monotonic()
    eng = OfflineEngine(model, args, interp, log, env=env | threads_in_process(env)).start()
    start_s = time.monotonic() - t0
    assert len(eng.proc.vital) == 1, eng.proc.vital
    assert eng.close() == []
    return start_s


def import_seconds(interp, module: str) -> float:
    """`import <module>` alone in a fresh engine interpreter."""
    t0 = time.monotonic()
    subprocess.run([str(interp.python), "-c", f"import {module}"], check=True, capture_output=True,
                   env=interp.env())
    return time.monotonic() - t0


def together_seconds(n: int, model, args, interp, tmp: Path) -> float:
    """Wall time until `n` offline engines begun at once are all ready."""
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        engines = list(pool.map(lambda i: OfflineEngine(model, args, interp, tmp / f"together-{n}-{i}.log").start(),
                                range(n)))
    seconds = time.monotonic() - t0
    for eng in engines:
        assert eng.close() == []
    return seconds


def print_phases(kind: str, timings: list[dict]) -> None:
    for name in PHASES:
        values = [t[name] for t in timings]
        print(f"{kind:8s} {name:22s} median {statistics.median(values):5.0f} s  "
              f"min {min(values):4.0f}  max {max(values):4.0f}  (log stamps, to the second)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--phases", action="store_true", help="where each start's time went")
    ap.add_argument("--together", action="store_true", help="1, 2 and 3 starts at once, nothing else")
    opts = ap.parse_args()
    runs = opts.runs
    interp, entry, model = tiny_gemma4()
    if opts.together:
        with tempfile.TemporaryDirectory() as tmp:
            for n in (1, 2, 3):
                walls = [together_seconds(n, model, entry.engine_args, interp, Path(tmp)) for _ in range(runs)]
                print(f"{n} offline start(s) at once: wall median {statistics.median(walls):6.1f} s  "
                      f"min {min(walls):6.1f}  max {max(walls):6.1f}  (n={runs})")
        return
    if opts.phases:
        for module in ("torch", "vllm", "vllm.v1.engine.core", "vllm.v1.worker.cpu_worker"):
            seconds = sorted(import_seconds(interp, module) for _ in range(3))
            print(f"import {module:28s} median {seconds[1]:5.1f} s  (fresh interpreter, n=3)")
    with tempfile.TemporaryDirectory() as tmp:
        for cls in (OfflineEngine, ServerEngine):
            timings = [] if opts.phases else None
            figures = [one_run(cls, model, entry.engine_args, interp, Path(tmp) / f"{cls.kind}-{i}.log", timings)
                       for i in range(runs)]
            if timings:
                print_phases(cls.kind, timings)
            starts, verdicts = zip(*figures)
            print(f"{cls.kind:8s} start     median {statistics.median(starts):6.1f} s  "
                  f"min {min(starts):6.1f}  max {max(starts):6.1f}  (n={runs})")
            print(f"{cls.kind:8s} verdict   median {statistics.median(verdicts):6.2f} s  "
                  f"min {min(verdicts):6.2f}  max {max(verdicts):6.2f}  after SIGKILL of EngineCore"
                  f"  (goal < 2 s; plain openai client: 600 s timeout)")
        starts = [reference_start(model, entry.engine_args, interp, Path(tmp) / f"reference-{i}.log")
                  for i in range(runs)]
        print(f"{'reference':9s} start    median {statistics.median(starts):6.1f} s  "
              f"min {min(starts):6.1f}  max {max(starts):6.1f}  (n={runs}; one process, TP 1)")


if __name__ == "__main__":
    main()
