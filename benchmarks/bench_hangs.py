"""Time to a hang verdict beside the stall bound, on the tiny Gemma4 with a
fault inside the engine that stops it admitting requests (its /health
still answers), offline and server, at a few stall bounds. Each bound
costs an engine start: a hung engine is given up on. Not part of `make
test`; prints figures.

Goal: the verdict within twice the stall bound (its own bound plus the
watch's reading interval and the stacks' dump).
usage: python benchmarks/bench_hangs.py [--bounds 5,10,20]
"""
import argparse
import tempfile
import time
from pathlib import Path

from _tiny import tiny_gemma4

from harness.engines.base import Sampling
from harness.engines.faults import fault_env
from harness.engines.offline import OfflineEngine
from harness.engines.server import ServerEngine
from harness.workloads.chat import user


def one_run(cls, model, args, interp, log, stall_s):
    engine = cls(model, args, interp, log, env=fault_env("stop-admitting")).start()
    try:
        # The one request it admits (a fresh engine's first step compiles
        # kernels, longer than the shorter bounds here), then the bound.
        engine.chat([user("first")], Sampling(max_tokens=4))
        engine.stall_s = stall_s
        began = time.monotonic()
        [r] = engine.chat([user("second")], Sampling(max_tokens=4))
        took = time.monotonic() - began
    finally:
        survivors = engine.close()
    assert getattr(r, "cause", None) is not None and r.cause.value == "hang", r
    assert survivors == [], survivors
    return took, len(r.stacks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bounds", default="5,10,20")
    bounds = [float(b) for b in ap.parse_args().bounds.split(",")]
    interp, entry, model = tiny_gemma4()
    with tempfile.TemporaryDirectory() as tmp:
        for cls in (OfflineEngine, ServerEngine):
            for bound in bounds:
                took, stacks = one_run(cls, model, entry.engine_args, interp,
                                       Path(tmp) / f"{cls.kind}-{bound}.log", bound)
                print(f"{cls.kind:8s} stall bound {bound:5.1f} s  verdict after {took:6.2f} s "
                      f"({took / bound:4.2f}x the bound; goal <= 2x)  stacks of {stacks} processes")


if __name__ == "__main__":
    main()
