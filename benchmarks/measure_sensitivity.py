"""How small a fault each invariance family catches: an in-engine
perturbation of one item's embedding, scaled from 1e-5 to 1 times that
embedding's standard deviation, against the family's comparison (the
harness's comparator with the same-stack profile calibrated for this host
kind and model, a tolerated split followed on the reference's stack, as
the checks do). On a noisy path (`--engine-noise S`: both engines a noisy
host, judged by that host kind's calibrated profile; or a noisy host
itself) it prints the detection threshold under the calibrated tolerance.

One engine runs with the leak faults switched on (mmharness_faults:
padding-leak perturbs every clip shorter than the longest in a ragged audio
encoder call; vision-chunk-leak every image or frame after the first of a
vision-tower pass) and its control file steps the scale; scale 0 and the
items a fault never touches (the longest clip, the first item of a pass)
are the controls. The references are each request alone on a clean
reference engine. Prints, per family and item, the smallest scale caught
(caught at every larger scale too), and per family the smallest scale that
catches every item the fault reaches: a measured figure, not a pass
criterion. Asserts nothing.

usage: .venv/bin/python benchmarks/measure_sensitivity.py [--engine-noise S] [--kernels LEVEL]
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from _tiny import GREEDY_16, tiny_gemma4

from harness.checks.comparators import compare_greedy
from harness.checks.noise import profile_for
from harness.engines.faults import fault_env
from harness.engines.hosts import host_kind
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import Completion
from harness.engines.parallel import placement
from harness.setup.cpu_features import LEVEL_NAMES, NATIVE
from harness.runner.runner import REFERENCE_ARGS
from harness.workloads import audio, vision
from harness.workloads.chat import with_uuids

SCALES = (0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 1.0)
MODULE_GROUPS = {
    "ragged audio (clips)": audio.clip_workload("ragged", [1.0, 3.5, 7.0, 12.0]),
    "encoder (images, video frames)": vision.encoder_workload(4, video_frames=8, videos=1),
}
GOAL = 1e-2


def answers(engine, work, tag: str) -> list:
    return engine.chat([with_uuids(r.conversation, f"{tag}-{i}") for i, r in enumerate(work.requests)], GREEDY_16)


def follower(ref, conversation, tag: str):
    """The reference's stack forced along the batch's tokens through a split."""
    def follow(tokens: list[int]):
        sampling = dataclasses.replace(GREEDY_16, max_tokens=GREEDY_16.max_tokens - len(tokens))
        if sampling.max_tokens <= 0:  # the split was at the last position
            return Completion(text="", token_ids=[], logprobs=[], finish_reason="length")
        return ref.chat([with_uuids(conversation, f"{tag}-{len(tokens)}")], sampling, forced=[tokens])[0]
    return follow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine-noise", type=float, default=0.0)
    parser.add_argument("--kernels", default=NATIVE, choices=LEVEL_NAMES)
    opts = parser.parse_args()
    _, entry, model = tiny_gemma4()
    interpreter = EngineInterpreter(kernels=opts.kernels, noise=opts.engine_noise)
    with tempfile.TemporaryDirectory() as tmp:
        with OfflineEngine(model, {**entry.engine_args, **REFERENCE_ARGS}, interpreter,
                           Path(tmp) / "ref.log", env=placement(1, "cpu")) as ref, \
                OfflineEngine(model, {**entry.engine_args, **REFERENCE_ARGS}, interpreter, Path(tmp) / "faulted.log",
                              env=placement(1, "cpu") | fault_env("padding-leak", "vision-chunk-leak", scale=0.0)) \
                as faulted:
            ref.start()
            profile = profile_for("cpu", host_kind("cpu", ref.identity), entry.name,
                                  entry.engine_args.get("dtype"), "same-stack")
            solo = {name: [ref.chat([with_uuids(r.conversation, f"solo-{name}-{i}")], GREEDY_16)[0]
                           for i, r in enumerate(work.requests)] for name, work in MODULE_GROUPS.items()}
            caught: dict[str, dict[str, list[float]]] = {name: {} for name in MODULE_GROUPS}
            faulted.start()
            for scale in SCALES:
                for name, work in MODULE_GROUPS.items():
                    with faulted.control.steering(fault_scale=scale):
                        got = answers(faulted, work, f"{name}-{scale}")
                    for r, g, s in zip(work.requests, got, solo[name]):
                        follow = follower(ref, r.conversation, f"follow-{name}-{scale}-{r.label}")
                        if not compare_greedy(g, s, profile, follow=follow).ok:
                            label = r.label
                            caught[name].setdefault(label, []).append(scale)
    print(f"profile {profile.name} ({'exact' if profile.exact else f'logprob_steps {profile.logprob_steps}, split_margin_nats {profile.split_margin_nats}, max_splits {profile.max_splits}'}); "
          f"scales {list(SCALES)}")
    for name, work in MODULE_GROUPS.items():
        smallest = {}
        for label in work.labels:
            at = caught[name].get(label, [])
            # The smallest scale from which every larger one is caught too.
            above = [s for s in SCALES if s > 0]
            first = next((s for i, s in enumerate(above) if all(t in at for t in above[i:])), None)
            smallest[label] = first
            note = "control (never perturbed)" if not at else f"caught from {first:g}" if first else f"caught at {at}"
            if 0.0 in at:
                note += "  <- CAUGHT AT SCALE 0: a false alarm"
            print(f"  {name}: {label:<22} {note}")
        reached = [s for s in smallest.values() if s is not None]
        family = max(reached) if reached else None
        print(f"{name}: every item the fault reaches caught from {family:g} x its embedding's std "
              f"({len(reached)} items; goal {GOAL:g}: {'met' if family is not None and family <= GOAL else 'NOT met'})"
              if family is not None else f"{name}: no item caught at any scale")


if __name__ == "__main__":
    main()
