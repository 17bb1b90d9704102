"""One model's 4-bit answers at two kernel levels of the same engine, and
each against HF on the dequantized model: what a refused 4-bit calibration
on one level is made of. Prints the calibration's figures
(harness.calibration.measure) for level A against HF, level B against HF,
and A against B (the same engine and checkpoint: only the kernel library
differs), each answer walked to its first split. Not part of `make test`.

usage: python benchmarks/compare_kernel_levels.py [--model tiny-gemma4-awq] [--a native] [--b avx512]
"""
import argparse
import tempfile
from pathlib import Path

from harness.calibration import workloads
from harness.calibration.measure import measure
from harness.calibration.paths import LONG_SAMPLING, PLAIN
from harness.engines.interpreter import EngineInterpreter
from harness.engines.pool import EnginePool
from harness.models import models_for
from harness.runner import Runner
from harness.schedule.placement import for_tier


def answers(level: str, entry, logs: Path, work):
    interpreter = EngineInterpreter(None, "cpu", kernels=level)
    built = interpreter.build_tiny_model(entry.tiny_arch, overrides=entry.build)
    pool = EnginePool(interpreter, logs / level, watch_memory=False, placement=for_tier("cpu"))
    runner = Runner(entry, str(built), PLAIN, pool, on_engine=lambda e: None)
    try:
        run = runner.batch(work, LONG_SAMPLING)
        run.outcomes
        return run, runner, interpreter.host.get("predicted_kernels", "?")
    finally:
        pool.close_all()


def pairs(a, b, name):
    return [(f"{name}:{label}", a[label], b[label], None) for label in a.labels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-gemma4-awq")
    parser.add_argument("--a", default="native")
    parser.add_argument("--b", default="avx512")
    args = parser.parse_args()
    entry = next(e for e in models_for("cpu") if e.name == args.model)
    work = workloads.four_bit_texts()
    with tempfile.TemporaryDirectory(prefix="mmh-levels-") as tmp:
        a, runner, kernels_a = answers(args.a, entry, Path(tmp), work)
        b, _, kernels_b = answers(args.b, entry, Path(tmp), work)
        hf = runner.dequantized_reference(work, LONG_SAMPLING)
        for name, x, y in ((f"{args.a} ({kernels_a}) vs HF", a, hf), (f"{args.b} ({kernels_b}) vs HF", b, hf),
                           (f"{args.a} vs {args.b}", a, b)):
            figs = measure(pairs(x, y, name))
            print(f"{name}: {figs.pairs} pairs, {figs.positions} positions, max |Δlogprob| {figs.max_steps:.2f} "
                  f"steps ({figs.max_delta_nats:.4f} nats), {figs.splits} split(s), widest margin "
                  f"{figs.max_split_margin:.3f} nats, {figs.splits_outside_top_k} outside the top-k")
            for note in figs.notes[:3]:
                print(f"    {note}")


if __name__ == "__main__":
    main()
