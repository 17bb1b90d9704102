#!/usr/bin/env python3
"""Finding 020: in vLLM's Gemma4, an image's answer depends on the other
images of its batch: four single-image requests of different sizes (96x96,
384x384, 480x96, 96x480) generated together, and the 384x384 request's
logprobs differ from its answer alone, by one rounding of a bfloat16 logit.
The same image beside one or two of the others answers as alone.

Runs vLLM offline and the standard library (numpy and PIL come with vLLM);
for the tiny model and its seeded pictures it imports the tiny-model
builder and media module of the mmharness checkout named below: nothing
else of mmharness.

What it does: the 384x384 image alone, then in five batches (with the
96x96 image; with the wide one; with wide and tall; the four single-image
requests; with a request of two images), greedy, 8 tokens with logprobs,
EOS ignored, prefix caching and the processor cache off, each request's
images under uuids of their own (no encoder cache is shared between
batches). Exit 1 and "REPRODUCED" when the image answers otherwise than
alone in a batch (measured: the four single-image requests only); exit 0
when every batch answers alike.

    python repro.py [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import os
import sys

CHECKOUT = "/work/main"
SIZES = ((96, 96), (384, 384), (480, 96), (96, 480))
PROMPT = "Describe what you see."


def model_dir(args) -> str:
    """--model, else the tiny Gemma4 built by the checkout's builder."""
    if args.model:
        return args.model
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model("gemma4"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="the model directory (default: build the tiny model)")
    p.add_argument("--mmharness", default=CHECKOUT, help="the checkout whose tiny-model builder and media to use")
    args = p.parse_args()
    sys.path.insert(0, args.mmharness)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from fixtures import media

    llm = LLM(model=model_dir(args), dtype="bfloat16", enforce_eager=True, max_model_len=2048, max_num_seqs=16,
              max_num_batched_tokens=8192, limit_mm_per_prompt={"image": 4, "audio": 1, "video": 1},
              enable_prefix_caching=False, mm_processor_cache_gb=0)
    tokenizer = llm.get_tokenizer()
    small, square, wide, tall = [media.image(w, h, seed=500 + i) for i, (w, h) in enumerate(SIZES)]
    sampling = SamplingParams(max_tokens=8, temperature=0.0, logprobs=1, ignore_eos=True)
    made = [0]

    def request(images):
        made[0] += 1
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": [*({"type": "image"} for _ in images), {"type": "text", "text": PROMPT}]}],
            add_generation_prompt=True, tokenize=False)
        return {"prompt": prompt, "multi_modal_data": {"image": images if len(images) > 1 else images[0]},
                "multi_modal_uuids": {"image": [f"r{made[0]}-{i}" for i in range(len(images))]}}

    def answer(output):
        completion = output.outputs[0]
        return completion.token_ids, [round(lp[t].logprob, 5) for t, lp in zip(completion.token_ids,
                                                                                 completion.logprobs)]

    alone = answer(llm.generate([request([square])], sampling)[0])
    print(f"alone                 {alone[0]} {alone[1]}")
    batches = {"beside 96x96": [[small], [square]], "beside wide": [[square], [wide]],
               "beside wide, tall": [[square], [wide], [tall]], "the four single-image": [[small], [square], [wide], [tall]],
               "beside a pair": [[square], [small, square]]}
    reproduced = False
    for name, batch in batches.items():
        outputs = llm.generate([request(images) for images in batch], sampling)
        got = answer(outputs[next(i for i, images in enumerate(batch) if images == [square])])
        same = got == alone
        print(f"{name:21s} {got[0]} {got[1]}  {'equal' if same else 'DIFFERENT'}")
        reproduced |= not same
    print("REPRODUCED: the 384x384 image answers otherwise than alone in a batch" if reproduced
          else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
