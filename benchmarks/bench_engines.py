"""Engine start time (offline, server) and time-to-verdict after SIGKILL of
the engine core, over N runs each. Not part of `make test`; prints figures.

Goal: time-to-verdict under 2 s, where a plain openai client would wait out
its 600 s default timeout.
usage: python benchmarks/bench_engines.py [--runs 5]
"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _tiny import tiny_gemma4

from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.offline import OfflineEngine
from harness.engines.server import ServerEngine
from harness.workloads.chat import user


def one_run(cls, model, args, interp, log):
    t0 = time.monotonic()
    eng = cls(model, args, interp, log).start()
    start_s = time.monotonic() - t0
    results, verdict_s = kill_core_during(eng, [user(f"long {i}") for i in range(4)],
                                          Sampling(max_tokens=1500))
    assert not results[0].ok, "the engine answered although its core was killed"
    assert eng.close() == []
    return start_s, verdict_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    interp, entry, model = tiny_gemma4()
    with tempfile.TemporaryDirectory() as tmp:
        for cls in (OfflineEngine, ServerEngine):
            figures = [one_run(cls, model, entry.engine_args, interp, Path(tmp) / f"{cls.kind}-{i}.log")
                       for i in range(runs)]
            starts, verdicts = zip(*figures)
            print(f"{cls.kind:8s} start     median {statistics.median(starts):6.1f} s  "
                  f"min {min(starts):6.1f}  max {max(starts):6.1f}  (n={runs})")
            print(f"{cls.kind:8s} verdict   median {statistics.median(verdicts):6.2f} s  "
                  f"min {min(verdicts):6.2f}  max {max(verdicts):6.2f}  after SIGKILL of EngineCore"
                  f"  (goal < 2 s; plain openai client: 600 s timeout)")


if __name__ == "__main__":
    main()
