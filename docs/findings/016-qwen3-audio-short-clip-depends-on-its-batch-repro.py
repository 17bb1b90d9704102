#!/usr/bin/env python3
"""Finding 016: in vLLM's Qwen3-ASR (and Qwen3-Omni, whose audio encoder it
shares), a clip shorter than the encoder's 1 s chunk answers otherwise
beside a longer clip: its last chunk is padded to the longest chunk of its
encoder call, not to the model's 100 frames, and the convolutions read the
padding.

Runs vLLM offline and the standard library (numpy comes with vLLM); for the
tiny model it imports the tiny-model builder of the mmharness checkout named
below: nothing else of mmharness.

What it does: a 7.0 s, a 0.5 s (and one sample) and a 10.2 s clip in one
generate call, then each alone, greedy, 8 tokens with logprobs, prefix caching and the processor
cache off. Exit 1 and "REPRODUCED" where the short clip's tokens or
logprobs differ; exit 0 where every clip answers alike.

    python repro.py [--arch qwen3-asr|qwen3-omni] [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import os
import sys

CHECKOUT = "/work/main"
# The short clip second: vLLM's offline engine may step on the first request
# before the others arrive, so the first one's encoder call is its own.
CLIPS_S = (7.0, 0.5000625, 10.2)
SHORT = 1
SAMPLE_RATE = 16000


def model_dir(args) -> str:
    if args.model:
        return args.model
    sys.path.insert(0, args.mmharness)
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model(args.arch))


def clip(seconds: float, index: int):
    import numpy as np
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.4 * np.sin(2 * np.pi * (300.0 + 500 * index) * t)).astype(np.float32), SAMPLE_RATE


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="qwen3-asr", choices=("qwen3-asr", "qwen3-omni"))
    p.add_argument("--model", help="the model directory (default: build the tiny model)")
    p.add_argument("--mmharness", default=CHECKOUT, help="the checkout whose tiny-model builder to use")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from transformers import AutoProcessor
    from vllm import LLM, SamplingParams

    model = model_dir(args)
    prompt = AutoProcessor.from_pretrained(model).apply_chat_template(
        [{"role": "user", "content": [{"type": "audio"}]}], add_generation_prompt=True, tokenize=False)
    llm = LLM(model=model, dtype="bfloat16", enforce_eager=True, max_model_len=2048, max_num_seqs=8,
              limit_mm_per_prompt={"audio": 1}, enable_prefix_caching=False, mm_processor_cache_gb=0)
    sampling = SamplingParams(max_tokens=8, temperature=0.0, logprobs=1)
    requests = [{"prompt": prompt, "multi_modal_data": {"audio": clip(s, i)}} for i, s in enumerate(CLIPS_S)]

    def answer(output):
        c = output.outputs[0]
        return c.token_ids, [round(lp[t].logprob, 6) for t, lp in zip(c.token_ids, c.logprobs)]
    batched = [answer(o) for o in llm.generate(requests, sampling)]
    alone = [answer(llm.generate([r], sampling)[0]) for r in requests]
    reproduced = batched[SHORT] != alone[SHORT]
    for seconds, b, a in zip(CLIPS_S, batched, alone):
        print(f"{seconds:5.1f} s batched {b}\n        alone   {a}  {'equal' if a == b else 'DIFFERENT'}")
    print("REPRODUCED: the short clip answers otherwise beside a longer one" if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
