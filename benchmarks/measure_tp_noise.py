"""The TP noise profile of the CPU tier: how far TP 2 moves the tiny Gemma4's
greedy outputs from TP 1 with LoRA on, when nothing is wrong. The same mixed
workload (image and text prompts, base and two adapters, 16 tokens) runs at
TP 1 and TP 2. TP splits each projection's sum across ranks and adds the
parts in bfloat16, so logprobs move by more than one stack's batch noise.
Prints the figures and the noise_profiles.toml entry they make (path "tp");
asserts nothing.

usage: .venv/bin/python benchmarks/measure_tp_noise.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _noise import figures, profile_entry
from _tiny import GREEDY_16, tiny_gemma4

from harness.engines.offline import OfflineEngine
from harness.engines.parallel import placement
from harness.workloads import lora
from harness.workloads.chat import with_uuids


def main() -> None:
    interpreter, entry, model = tiny_gemma4()
    ad = lora.Adapters(model)
    work = lora.mixed("tp-noise", [(m, a) for m in ("image", "text") for a in (None, ad.tower, ad.lm)]
                      + [("image", None), ("image", ad.tower), ("text", ad.lm)])
    outs = {}
    for tp in (1, 2):
        args = {**entry.engine_args_for(lora.FAMILY), **({"tensor_parallel_size": tp} if tp > 1 else {})}
        with tempfile.TemporaryDirectory() as tmp, \
                OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log",
                              env=placement(tp, "cpu")) as engine:
            engine.start()
            outs[tp] = engine.chat([with_uuids(r.conversation, f"tp{tp}-{i}") for i, r in enumerate(work.requests)],
                                   GREEDY_16, adapters=work.adapters)
    for label, a, b in zip(work.labels, outs[1], outs[2]):
        split = next((p for p, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), None)
        if split is not None:
            print(f"  {label}: split at position {split}: TP1 {a.token_ids[split]}, TP2 {b.token_ids[split]}")
    figs = figures(list(zip(outs[2], outs[1])))
    print(f"TP 2 vs TP 1: {figs['pairs'] - figs['splits']}/{figs['pairs']} token-equal; {figs['positions']} "
          f"same-token positions before any split: max {figs['max_steps']} bf16 steps of the logprob's size; "
          f"widest margin at a split {figs['max_split_margin']} nats ({figs['splits_outside_top_k']} outside top-5)")
    print("\nnoise_profiles.toml:\n" + profile_entry(
        "tp", figs, f"benchmarks/measure_tp_noise.py: tiny Gemma4 with LoRA, {figs['pairs']} image and text "
        f"prompts x {GREEDY_16.max_tokens} tokens, TP 2 against TP 1"))


if __name__ == "__main__":
    main()
