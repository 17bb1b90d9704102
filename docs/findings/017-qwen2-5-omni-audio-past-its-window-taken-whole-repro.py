#!/usr/bin/env python3
"""Finding 017: vLLM's Qwen2.5-Omni takes a clip past the 30 s its model's
processor cuts it at whole: more audio placeholders than the processor puts
in the prompt.

Runs vLLM offline, and the model's own processor from transformers (which
vLLM brings); for the tiny model it imports the tiny-model builder of the
mmharness checkout named below: nothing else of mmharness.

What it does: for clips of 20 s and 40 s, counts the audio placeholder
tokens the model's processor puts in the prompt and those in the prompt
vLLM ran. Exit 1 and "REPRODUCED" where they differ; exit 0 where they
agree.

    python repro.py [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import os
import sys

CHECKOUT = "/work/main"
SECONDS = (20.0, 40.0)
SAMPLE_RATE = 16000


def model_dir(args) -> str:
    """--model, else the tiny Qwen2.5-Omni built by the checkout's builder."""
    if args.model:
        return args.model
    sys.path.insert(0, args.mmharness)
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model("qwen2-5-omni"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="the model directory (default: build the tiny model)")
    p.add_argument("--mmharness", default=CHECKOUT, help="the checkout whose tiny-model builder to use")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import numpy as np
    from transformers import AutoProcessor
    from vllm import LLM, SamplingParams

    model = model_dir(args)
    processor = AutoProcessor.from_pretrained(model)
    audio_id = processor.tokenizer.convert_tokens_to_ids(processor.audio_token)
    prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": "audio"}]}],
                                           add_generation_prompt=True, tokenize=False)
    llm = LLM(model=model, dtype="bfloat16", enforce_eager=True, max_model_len=2048, max_num_seqs=4,
              limit_mm_per_prompt={"audio": 1}, enable_prefix_caching=False, mm_processor_cache_gb=0)
    reproduced = False
    for seconds in SECONDS:
        clip = (0.3 * np.sin(np.arange(int(seconds * SAMPLE_RATE)) * 0.05)).astype(np.float32)
        want = int((processor(text=prompt, audio=[clip], sampling_rate=SAMPLE_RATE,
                              return_tensors="pt")["input_ids"][0] == audio_id).sum())
        out = llm.generate([{"prompt": prompt, "multi_modal_data": {"audio": (clip, SAMPLE_RATE)}}],
                           SamplingParams(max_tokens=1, temperature=0.0))[0]
        got = list(out.prompt_token_ids).count(audio_id)
        print(f"{seconds:g} s: the model's processor places {want} audio tokens, vLLM {got}"
              + ("" if got == want else "  DIFFERENT"))
        reproduced |= got != want
    print("REPRODUCED: vLLM's prompt is not the model's processor's" if reproduced else "not reproduced")
    return 1 if reproduced else 0


if __name__ == "__main__":
    sys.exit(main())
