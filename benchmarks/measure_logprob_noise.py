"""The same-stack noise profile of the CPU tier: how far two answers of one
request lie apart on one engine when nothing is wrong. The same requests
(ragged clips, equal clips, images and a video, text) run alone twice and
batched twice on the tiny Gemma4's reference engine (caches off). Prints the
figures, the noise_profiles.toml entry they make, and what the tiny model's
answers look like against that bound: the share of positions whose top-1
margin lies within it, and how far the references of one workload lie from
one another. Prints figures, asserts nothing.

usage: .venv/bin/python benchmarks/measure_logprob_noise.py
"""
from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from _noise import apart, figures, margin_figures, profile_entry
from _tiny import GREEDY_16, tiny_gemma4

from harness.engines.offline import OfflineEngine
from harness.runner.runner import REFERENCE_ARGS
from harness.workloads import audio, vision
from harness.workloads.chat import with_uuids
from harness.workloads.text import text_workload

WORKLOADS = {
    "ragged clips": audio.clip_workload("ragged", [1.0, 3.5, 7.0, 12.0]),
    "equal clips": audio.clip_workload("equal", [3.0] * 4),
    "images and a video": vision.encoder_workload(1, video_frames=4, videos=1),
    "text": text_workload(),
}


def main() -> None:
    interpreter, entry, model = tiny_gemma4()
    args = {**entry.engine_args, **REFERENCE_ARGS}
    runs: dict[str, dict[str, list]] = {name: {} for name in WORKLOADS}
    with tempfile.TemporaryDirectory() as tmp, \
            OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log") as engine:
        engine.start()
        for name, work in WORKLOADS.items():
            convs = [r.conversation for r in work.requests]
            for n in (1, 2):
                runs[name][f"alone{n}"] = [engine.chat([with_uuids(c, f"{name}-a{n}-{i}")], GREEDY_16)[0]
                                           for i, c in enumerate(convs)]
                runs[name][f"batch{n}"] = engine.chat([with_uuids(c, f"{name}-b{n}-{i}")
                                                       for i, c in enumerate(convs)], GREEDY_16)
    pairs = [(a, b) for by_run in runs.values() for x, y in itertools.combinations(by_run, 2)
             for a, b in zip(by_run[x], by_run[y])]
    figs = figures(pairs)
    print(f"same stack, alone and batched, twice each ({figs['pairs']} answer pairs, "
          f"{figs['positions']} positions): max |Δlogprob| {figs['max_steps']} bf16 steps, "
          f"{figs['splits']} split(s), widest margin at a split {figs['max_split_margin']} nats")
    bound = 0.0 if figs["splits"] == 0 else 2 * figs["max_split_margin"]
    answers = [a for by_run in runs.values() for a in by_run["alone1"]]
    for nats in sorted({bound, 0.5, 1.0}):
        m = margin_figures(answers, nats)
        print(f"top-1 margins within {nats} nats of a tie: {m['share_within_bound']:.1%} of {m['positions']} "
              f"positions (median margin {m['median_margin']} nats)"
              + ("  <- this profile's bound" if nats == bound else "  (the former near-tie rule)" if nats == 1.0 else ""))
    for name, work in WORKLOADS.items():
        far = apart(dict(zip(work.labels, runs[name]["alone1"])))
        print(f"references of '{name}' apart: {far['pairs']} pairs, fewest differing positions "
              f"{far['min_differing_positions']} of {GREEDY_16.max_tokens}; identical pairs "
              f"{far['identical_pairs'] or 'none'}; same first token {far['same_first_token'] or 'none'}")
    print("\nnoise_profiles.toml:\n" + profile_entry(
        "same-stack", figs, f"benchmarks/measure_logprob_noise.py: tiny Gemma4, {len(answers)} requests "
        f"({', '.join(WORKLOADS)}) x {GREEDY_16.max_tokens} tokens, alone twice and batched twice"))


if __name__ == "__main__":
    main()
