"""Does the thread layout an engine computes on change its answers? The
same workload runs alone and batched on the tiny Gemma4's reference engine
(caches off) under four layouts, one engine after another: bound to core 0,
bound to core 1 (the same layout on another core), to cores 0 and 1 (two
threads), and vLLM's own binding (its log says which cores). Prints, for
each pair of answers that should agree, the figures the noise profiles are
made of:
  batch vs alone, one engine        the noise a same-stack check meets within one engine
  alone, core 0 vs core 1           two engines bound alike
  core 0 vs cores 0-1, vLLM's own   two engines bound differently
Asserts nothing.

usage: .venv/bin/python benchmarks/measure_binding_noise.py [--kernels LEVEL] [--faults NAMES --fault-scale S]
"""
from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from _tiny import GREEDY_16, tiny_gemma4

from harness.calibration import machine
from harness.calibration.measure import measure
from harness.engines.faults import fault_env
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.engines.parallel import BIND_ENV
from harness.runner.runner import REFERENCE_ARGS
from harness.setup.cpu_features import LEVEL_NAMES, NATIVE
from harness.workloads import audio, vision
from harness.workloads.chat import with_uuids
from harness.workloads.text import text_workload

WORKLOADS = (audio.clip_workload("ragged", [1.0, 3.5, 7.0, 12.0]),
             vision.encoder_workload(1, video_frames=4, videos=1), text_workload())
LAYOUTS = {"core 0": {BIND_ENV: "0"}, "core 1": {BIND_ENV: "1"}, "cores 0-1": {BIND_ENV: "0,1"}, "vLLM's own": {}}


def answers(interpreter, model, args, env: dict, tag: str) -> dict[str, list]:
    """Every workload's answers alone and batched on one engine, and the
    cores its engine said it bound its threads to."""
    out: dict[str, list] = {"alone": [], "batch": [], "cores": []}
    with tempfile.TemporaryDirectory() as tmp, \
            OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log", env=env) as engine:
        engine.start()
        for work in WORKLOADS:
            convs = [r.conversation for r in work.requests]
            out["alone"] += [engine.chat([with_uuids(c, f"{tag}-{work.name}-a{i}")], GREEDY_16)[0]
                             for i, c in enumerate(convs)]
            out["batch"] += engine.chat([with_uuids(c, f"{tag}-{work.name}-b{i}") for i, c in enumerate(convs)],
                                        GREEDY_16)
        out["cores"] = re.findall(r"local_rank=\d+, core ids=(\[[\d, ]*\])", engine.log_path.read_text())
    return out


def line(name: str, pairs: list) -> str:
    f = measure([(name, a, b, None) for a, b in pairs])
    return (f"{name:<34} {f.pairs:>3} pairs, {f.positions:>4} positions: max |Δlogprob| "
            f"{f.max_steps:>6.2f} steps, {f.splits} split(s), widest margin {f.max_split_margin:.3f} nats")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default=NATIVE, choices=LEVEL_NAMES)
    parser.add_argument("--faults", default="", help="in-engine fault switches, comma-separated")
    parser.add_argument("--fault-scale", type=float, default=None)
    opts = parser.parse_args()
    _, entry, model = tiny_gemma4()
    interpreter = EngineInterpreter(kernels=opts.kernels)
    faults = fault_env(*opts.faults.split(","), scale=opts.fault_scale) if opts.faults else {}
    args = {**entry.engine_args, **REFERENCE_ARGS}
    runs = {name: answers(interpreter, model, args, {**env, **faults}, name.replace(" ", "-").replace("'", ""))
            for name, env in LAYOUTS.items()}
    print(f"host: {machine()}, {', '.join(interpreter.host['isa'])}, {interpreter.host['predicted_kernels']}; "
          f"kernel level {opts.kernels}"
          + (f"; faults {opts.faults} at scale {opts.fault_scale}" if opts.faults else ""))
    for name, out in runs.items():
        print(f"{name}: threads bound to {', '.join(out['cores']) or 'no core list in its log'}")
        print(line(f"batch vs alone, {name}", list(zip(out["batch"], out["alone"]))))
    for other in ("core 1", "cores 0-1", "vLLM's own"):
        for how in ("alone", "batch"):
            print(line(f"{how}, core 0 vs {other}", list(zip(runs["core 0"][how], runs[other][how]))))


if __name__ == "__main__":
    main()
