#!/usr/bin/env python3
"""Finding 014: in vLLM's Granite Speech, a clip's answer depends on the
other clips of its encoder call. Clips of different lengths in one call
are zero-padded to the longest, and the conformer encoder reads the padding
(no per-clip mask), so every clip but the longest gets other embeddings
than alone.

Runs vLLM offline and the standard library (numpy comes with vLLM); for the
tiny model it imports the tiny-model builder of the mmharness checkout
named below: nothing else of mmharness.

What it does: clips of 7.0, 3.5 and 10.2 s in one generate call, then
each alone, greedy, 8 tokens with logprobs, prefix
caching and the processor cache off. Exit 1 and "REPRODUCED" when a
clip's tokens or logprobs differ between the two; exit 0 when
every clip answers alike.

    python repro.py [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import os
import sys

CHECKOUT = "/work/main"
# Three clips: vLLM's offline engine may step on the first request before
# the others arrive, so the first one's encoder call is its own.
CLIPS_S = (7.0, 3.5, 10.2)
SAMPLE_RATE = 16000


def model_dir(args) -> str:
    """--model, else the tiny Granite Speech built by the checkout's builder."""
    if args.model:
        return args.model
    sys.path.insert(0, args.mmharness)
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model("granite-speech"))


def clip(seconds: float, index: int):
    """A sweep, its own per clip."""
    import numpy as np
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    start, end = 300.0 + 200 * index, 1200.0 + 400 * index
    phase = 2 * np.pi * (start * t + (end - start) * t * t / (2 * seconds))
    return (0.4 * np.sin(phase)).astype(np.float32), SAMPLE_RATE


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="the model directory (default: build the tiny model)")
    p.add_argument("--mmharness", default=CHECKOUT, help="the checkout whose tiny-model builder to use")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    model = model_dir(args)
    llm = LLM(model=model, dtype="bfloat16", enforce_eager=True, max_model_len=2048, max_num_seqs=8,
              limit_mm_per_prompt={"audio": 1}, enable_prefix_caching=False, mm_processor_cache_gb=0)
    tokenizer = llm.get_tokenizer()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": "What do you hear?"}]}],
        add_generation_prompt=True, tokenize=False)
    sampling = SamplingParams(max_tokens=8, temperature=0.0, logprobs=1)
    requests = [{"prompt": prompt, "multi_modal_data": {"audio": clip(s, i)}} for i, s in enumerate(CLIPS_S)]

    def answer(output):
        completion = output.outputs[0]
        return completion.token_ids, [round(lp[t].logprob, 5) for t, lp in zip(completion.token_ids,
                                                                                 completion.logprobs)]
    batched = [answer(o) for o in llm.generate(requests, sampling)]
    alone = [answer(llm.generate([r], sampling)[0]) for r in requests]
    reproduced = False
    for seconds, b, a in zip(CLIPS_S, batched, alone):
        same = b == a
        print(f"{seconds:4.1f} s  batched {b[0]} {b[1]}\n        alone   {a[0]} {a[1]}  "
              f"{'equal' if same else 'DIFFERENT'}")
        reproduced |= not same
    print("REPRODUCED: a clip answers otherwise beside a longer one" if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
