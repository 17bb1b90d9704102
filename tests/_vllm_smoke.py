"""Runs one tiny model in vLLM (offline `LLM`) and records greedy outputs as JSON.

    python tests/_vllm_smoke.py MODEL_DIR ARCH OUT_JSON

One engine start per model, so every check for that model runs here:
chat-template prompts (audio, image, text), raw prompts with placeholder
tokens (audio, image, and video for Gemma4), two different clips, and a
text prompt with top-5 logprobs for the comparison against HF transformers.
The test reads the JSON and judges; this script only runs and records.
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
    "seed": 0,
}
LIMIT_MM_PER_PROMPT = {
    "gemma4": {"image": 1, "audio": 1, "video": 1},
    "gemma3n": {"image": 1, "audio": 1},
}

# Raw prompts in each model's own turn format. Gemma4: vLLM tokenizes without
# adding <bos> once a chat template exists, so the prompt carries it; Gemma3n:
# the tokenizer adds it, so the prompt must not.
RAW_PROMPTS = {
    "gemma4": {
        "audio": "<bos><|turn>user\n<|audio|>What do you hear?<turn|>\n<|turn>model\n",
        "image": "<bos><|turn>user\n\n\n<|image|>\n\nWhat do you see?<turn|>\n<|turn>model\n",
        "video": "<bos><|turn>user\n\n\n<|video|>\n\nWhat happens?<turn|>\n<|turn>model\n",
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


def _video(num_frames: int, fps: float, seed: int) -> tuple:
    """Frames plus the metadata vLLM requires for Gemma4 video (it builds timestamps from it)."""
    frames = media.video_frames(num_frames, 64, 48, seed=seed)
    return frames, {"total_num_frames": num_frames, "fps": fps, "duration": num_frames / fps,
                    "video_backend": "opencv", "frames_indices": list(range(num_frames)),
                    "do_sample_frames": False}


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
    engine_kwargs = dict(ENGINE_KWARGS, limit_mm_per_prompt=LIMIT_MM_PER_PROMPT[arch])
    llm = LLM(model=model_dir, **engine_kwargs)
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
    if "video" in raw:
        prompts["raw_video"] = {"prompt": raw["video"], "multi_modal_data": {"video": _video(4, 2.0, seed=6)}}
    outputs = timed("raw", lambda: llm.generate(list(prompts.values()), greedy, use_tqdm=False))
    results.update({name: _record(out) for name, out in zip(prompts, outputs)})

    Path(out_path).write_text(json.dumps({
        "arch": arch, "engine_kwargs": engine_kwargs, "clips": CLIPS, "text_prompt": TEXT_PROMPT,
        "timings": timings, "results": results,
    }, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])
