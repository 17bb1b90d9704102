"""Runs one tiny model in vLLM (offline `LLM`) and records greedy outputs as JSON.

    python tests/_vllm_smoke.py MODEL_DIR ARCH OUT_JSON

One engine start per model, so every check for that model runs here:
chat-template prompts (audio, image, text), raw prompts with placeholder
tokens (audio, image), two different clips, and a text prompt with top-5
logprobs for the comparison against HF transformers. The test reads the
JSON and judges; this script only runs and records.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from fixtures import media

SAMPLE_RATE = 16000
MAX_TOKENS = 16
TOP_LOGPROBS = 5

ENGINE_KWARGS = {
    "dtype": "bfloat16",  # float32 audio crashes in oneDNN on this CPU build
    "enforce_eager": True,
    "max_model_len": 2048,
    "limit_mm_per_prompt": {"image": 1, "audio": 1},
    "seed": 0,
}

# Raw prompts in each model's own turn format. Gemma4: vLLM tokenizes without
# adding <bos> once a chat template exists, so the prompt carries it; Gemma3n:
# the tokenizer adds it, so the prompt must not.
RAW_PROMPTS = {
    "gemma4": {
        "audio": "<bos><|turn>user\n<|audio|>What do you hear?<turn|>\n<|turn>model\n",
        "image": "<bos><|turn>user\n\n\n<|image|>\n\nWhat do you see?<turn|>\n<|turn>model\n",
    },
    "gemma3n": {
        "audio": "<start_of_turn>user\n<audio_soft_token>What do you hear?<end_of_turn>\n<start_of_turn>model\n",
        "image": "<start_of_turn>user\n<image_soft_token>What do you see?<end_of_turn>\n<start_of_turn>model\n",
    },
}

# Two clips of one duration, so their prompts are token-for-token the same
# and only the audio itself can make the continuations differ.
CLIPS = {
    "clip_a": {"duration_s": 2.0, "kind": "sweep", "seed": 1},
    "clip_b": {"duration_s": 2.0, "kind": "noise", "seed": 2},
}
CHAT_CLIP = {"duration_s": 1.5, "kind": "tone", "seed": 3}
TEXT_PROMPT = "Tell me a short story about the sea."


def _clip(spec: dict):
    return media.audio_clip(spec["duration_s"], sample_rate=SAMPLE_RATE, kind=spec["kind"], seed=spec["seed"])


def _record(output) -> dict:
    completion = output.outputs[0]
    return {
        "prompt_token_ids": list(output.prompt_token_ids),
        "token_ids": list(completion.token_ids),
        "text": completion.text,
        # JSON object keys are strings; the test turns them back into ints.
        "logprobs": [{str(token): entry.logprob for token, entry in step.items()}
                     for step in (completion.logprobs or [])],
    }


def main(model_dir: str, arch: str, out_path: str) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams

    started = time.monotonic()
    llm = LLM(model=model_dir, **ENGINE_KWARGS)
    timings = {"engine_start_s": time.monotonic() - started}
    greedy = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, logprobs=TOP_LOGPROBS)
    results: dict[str, dict] = {}

    def timed(name, run):
        began = time.monotonic()
        outputs = run()
        timings[name] = time.monotonic() - began
        return outputs

    chat = {
        "chat_audio": [{"type": "audio_url", "audio_url": {"url": media.audio_data_url(_clip(CHAT_CLIP), SAMPLE_RATE)}},
                       {"type": "text", "text": "What do you hear?"}],
        "chat_image": [{"type": "image_url", "image_url": {"url": media.image_data_url(media.image(96, 64, seed=4))}},
                       {"type": "text", "text": "What do you see?"}],
        "chat_text": TEXT_PROMPT,
    }
    conversations = [[{"role": "user", "content": content}] for content in chat.values()]
    outputs = timed("chat", lambda: llm.chat(conversations, greedy, use_tqdm=False))
    results.update({name: _record(out) for name, out in zip(chat, outputs)})

    raw = RAW_PROMPTS[arch]
    prompts = {
        "raw_image": {"prompt": raw["image"], "multi_modal_data": {"image": media.image(64, 96, seed=5)}},
        **{f"raw_audio_{name}": {"prompt": raw["audio"], "multi_modal_data": {"audio": (_clip(spec), SAMPLE_RATE)}}
           for name, spec in CLIPS.items()},
    }
    outputs = timed("raw", lambda: llm.generate(list(prompts.values()), greedy, use_tqdm=False))
    results.update({name: _record(out) for name, out in zip(prompts, outputs)})

    Path(out_path).write_text(json.dumps({
        "arch": arch, "engine_kwargs": ENGINE_KWARGS, "clips": CLIPS, "text_prompt": TEXT_PROMPT,
        "timings": timings, "results": results,
    }, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])
