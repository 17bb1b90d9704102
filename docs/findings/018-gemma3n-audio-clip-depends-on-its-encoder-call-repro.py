#!/usr/bin/env python3
"""Finding 018: in vLLM's Gemma3n, a clip's answer depends on the other
clips of its encoder call. vLLM pads the clips of one call to the longest
and runs transformers' audio tower with the padding masked; but the
tower's subsampling convolutions take no mask: the second one reads the
first one's output over the padding (nonzero), where alone it reads its
own zero padding. The clip's last subsampled frame changes, and where the
encoder's stride-4 reduction keeps that frame (the clip's T mel frames
with T mod 16 in 1..4) so does its last audio token.

Runs vLLM offline and the standard library (numpy comes with vLLM); for the
tiny model it imports the tiny-model builder of the mmharness checkout named
below: nothing else of mmharness.

What it does: noise clips of 7.0, 3.1 and 9.5 s (308 mel frames for the
3.1 s one: 308 mod 16 = 4) in one generate call, then each alone, greedy,
8 tokens with logprobs, EOS ignored, prefix caching and the processor cache
off. Exit 1 and "REPRODUCED" when a clip's tokens or logprobs differ
between the two (measured: the 3.1 s clip, which shares its encoder call
with the 9.5 s one); exit 0 when every clip answers alike. Noise, not
sweeps or tones: on the tiny build's random weights only a clip like noise
leaves the first convolution's output over the padding nonzero after its
ReLU.

    python repro.py [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import os
import sys

CHECKOUT = "/work/main"
# Three clips: vLLM's offline engine may step on the first request before
# the others arrive, so the first one's encoder call is its own and the
# other two share one.
CLIPS_S = (7.0, 3.1, 9.5)
SAMPLE_RATE = 16000


def model_dir(args) -> str:
    """--model, else the tiny Gemma3n built by the checkout's builder."""
    if args.model:
        return args.model
    sys.path.insert(0, args.mmharness)
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model("gemma3n"))


def clip(seconds: float, index: int):
    """Seeded Gaussian noise, its own per clip."""
    import numpy as np
    rng = np.random.default_rng(index)
    noise = np.clip(rng.standard_normal(round(seconds * SAMPLE_RATE)) / 3.0, -1.0, 1.0)
    return (0.4 * noise).astype(np.float32), SAMPLE_RATE


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
    sampling = SamplingParams(max_tokens=8, temperature=0.0, logprobs=1, ignore_eos=True)
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
    print("REPRODUCED: a clip answers otherwise than alone, beside another clip in its encoder call"
          if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
