#!/usr/bin/env python3
"""Finding 019: vLLM's Voxtral refuses a valid stereo clip ("audio_array.ndim=2")
that every other audio model of vLLM takes, downmixed to mono.

Runs vLLM offline (LLM.chat, as the OpenAI server renders a chat request);
for the tiny model it imports the tiny-model builder of the mmharness
checkout named below: nothing else of mmharness. The clips are written as
WAV with the standard library.

What it does: a 2 s, 16 kHz, 16-bit stereo WAV (each channel its own
tone) as an `audio_url` data-URL part, then the same clip downmixed to
mono (the mean of the channels, what vLLM's own decoder makes of it).
Exit 1 and "REPRODUCED" where the stereo clip is refused while the mono
one is answered; exit 0 where both are answered.

    python repro.py [--model DIR] [--mmharness CHECKOUT]
"""
import argparse
import base64
import io
import os
import sys
import wave

CHECKOUT = "/work/main"
SAMPLE_RATE = 16000
SECONDS = 2.0


def model_dir(args) -> str:
    """--model, else the tiny Voxtral (Mistral format) built by the checkout's builder."""
    if args.model:
        return args.model
    sys.path.insert(0, args.mmharness)
    from fixtures.tiny_models import build_tiny_model
    return str(build_tiny_model("voxtral"))


def wav_bytes(clip, sample_rate: int) -> bytes:
    """float32 samples in [-1, 1], (samples,) or (samples, channels), as a 16-bit PCM WAV."""
    import numpy as np
    channels = 1 if clip.ndim == 1 else clip.shape[1]
    pcm = np.round(np.clip(clip, -1.0, 1.0) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())  # row-major: the channels interleaved
    return buffer.getvalue()


def conversation(wav: bytes) -> list:
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode("ascii")
    return [{"role": "user", "content": [{"type": "audio_url", "audio_url": {"url": url}},
                                         {"type": "text", "text": "What do you hear?"}]}]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="the model directory (default: build the tiny model)")
    p.add_argument("--mmharness", default=CHECKOUT, help="the checkout whose tiny-model builder to use")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    import numpy as np
    from vllm import LLM, SamplingParams

    t = np.arange(int(SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    stereo = np.stack([0.5 * np.sin(2 * np.pi * 440 * t), 0.3 * np.sin(2 * np.pi * 660 * t)],
                      axis=1).astype(np.float32)
    clips = {"stereo": stereo, "mono (the same clip downmixed)": stereo.mean(axis=1)}

    llm = LLM(model=model_dir(args), tokenizer_mode="mistral", config_format="mistral",
              load_format="mistral", dtype="bfloat16", enforce_eager=True, max_model_len=2048,
              max_num_seqs=4, limit_mm_per_prompt={"audio": 1})
    answered = {}
    for name, clip in clips.items():
        try:
            out = llm.chat(conversation(wav_bytes(clip, SAMPLE_RATE)),
                           SamplingParams(max_tokens=2, temperature=0.0), use_tqdm=False)[0]
            print(f"{name}: answered, {len(out.prompt_token_ids)} prompt tokens")
            answered[name] = True
        except Exception as e:  # the refusal the OpenAI server turns into HTTP 400
            print(f"{name}: refused: {type(e).__name__}: {e}")
            answered[name] = False
    stereo_ok, mono_ok = answered.values()
    if not stereo_ok and mono_ok:
        print("REPRODUCED: the stereo clip is refused, the same clip downmixed to mono is answered")
        return 1
    print("not reproduced" + ("" if stereo_ok else " (the mono clip is refused too)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
