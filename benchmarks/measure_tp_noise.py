"""How far TP 2 moves the tiny Gemma4's greedy outputs from TP 1 with LoRA
on, when nothing is wrong: the same mixed workload (image and text prompts,
base and two adapters, 16 tokens) at TP 1 and TP 2 on the CPU tier. TP
splits each projection's sum across ranks and adds the parts in bfloat16, so
logprobs move by more than one stack's batch noise: the TP-invariance
check's tolerance (harness/lora/effects.py TP_LOGPROB_STEPS) is set from
these figures. Prints figures, asserts nothing.

usage: .venv/bin/python benchmarks/measure_tp_noise.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _tiny import GREEDY_16, tiny_gemma4

from harness.checks.comparators import BF16_STEP
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
    deltas, steps, equal = [], [], 0
    for label, a, b in zip(work.labels, outs[1], outs[2]):
        equal += a.token_ids == b.token_ids
        for pos, (ta, tb) in enumerate(zip(a.token_ids, b.token_ids)):
            if ta != tb:
                print(f"  {label}: split at position {pos}: TP1 {ta} ({a.logprobs[pos][ta]:.3f}), "
                      f"TP2 {tb} ({b.logprobs[pos][tb]:.3f})")
                break
            d = abs(a.logprobs[pos][ta] - b.logprobs[pos][tb])
            deltas.append(d)
            steps.append(d / (BF16_STEP * max(1.0, abs(a.logprobs[pos][ta]))))
    print(f"TP 1 vs TP 2: {equal}/{len(work.labels)} token-equal; same-token positions {len(deltas)}: "
          f"max |Δlogprob| {max(deltas):.4f} nats, mean {sum(deltas) / len(deltas):.4f}; "
          f"max {max(steps):.1f} bf16 steps of the logprob's size")


if __name__ == "__main__":
    main()
