"""Audio workloads: clips of given durations as chat requests, with the
facts a scenario's premise guard needs (samples, feature frames, limits)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fixtures import media
from harness.verdicts import Cause, CheckFailure
from harness.workloads.chat import audio_part, user

SAMPLE_RATE = 16000
PROMPT = "What do you hear?"


@dataclass(frozen=True)
class Clip:
    duration_s: float
    samples: np.ndarray
    sample_rate: int = SAMPLE_RATE

    @property
    def label(self) -> str:
        return f"{self.duration_s:g}s"

    def wav(self) -> bytes:
        return media.encode_audio(self.samples, self.sample_rate, "wav")

    def conversation(self) -> list[dict]:
        return user(audio_part(self.wav()), PROMPT)


def clips(durations: list[float], *, seed: int = 0, kind: str = "sweep") -> list[Clip]:
    """Seeded clips; each clip gets its own seed so equal durations still differ in content."""
    return [Clip(d, media.audio_clip(d, sample_rate=SAMPLE_RATE, seed=seed + i, kind=kind))
            for i, d in enumerate(durations)]


@lru_cache(maxsize=8)
def processor(model: str):
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(model)


def feature_frames(model: str, clip: Clip) -> int:
    """Frames the model's own feature extractor makes of this clip."""
    fe = processor(model).feature_extractor
    out = fe([clip.samples], sampling_rate=clip.sample_rate, return_tensors="np")
    mask = out.get("input_features_mask", out.get("attention_mask"))
    return int(mask.sum()) if mask is not None else int(out["input_features"].shape[-2])


def max_audio_seconds(model: str) -> float:
    """The longest clip the model's processor takes whole: the feature
    extractor's truncation length, and for Gemma4 its audio token budget."""
    proc = processor(model)
    fe = proc.feature_extractor
    limits = []
    default = inspect.signature(fe.__call__).parameters.get("max_length")
    if default is not None and isinstance(default.default, int):
        limits.append(default.default / fe.sampling_rate)
    tokens, ms = getattr(proc, "audio_seq_length", None), getattr(proc, "audio_ms_per_token", None)
    if tokens and ms:
        limits.append(tokens * ms / 1000)
    if not limits:
        raise ValueError(f"{model}: its processor states no audio length limit")
    return min(limits)


def guard_lengths(clips_: list[Clip], frames: list[int], *, distinct: bool) -> dict:
    """The premise: lengths all differ (ragged) or are all equal (fast path),
    in samples and in feature frames. Returns the evidence it checked."""
    samples = [len(c.samples) for c in clips_]
    evidence = {"durations_s": [c.duration_s for c in clips_], "samples": samples,
                "feature_frames": frames}
    for name, values in (("samples", samples), ("feature frames", frames)):
        holds = len(set(values)) == len(values) if distinct else len(set(values)) == 1
        if not holds:
            want = "all differ" if distinct else "all be equal"
            raise CheckFailure(Cause.PREMISE, f"clip lengths in {name} must {want}, got {values}",
                               evidence=evidence)
    return evidence


def guard_one_step(prompt_tokens: list[int], limits: dict) -> dict:
    """The premise that the engine can schedule every prompt in one step."""
    total = sum(prompt_tokens)
    arithmetic = {"prompts": len(prompt_tokens), "prompt_tokens": prompt_tokens,
                  "total_prompt_tokens": total, **limits}
    if len(prompt_tokens) > limits["max_num_seqs"] or total > limits["max_num_batched_tokens"]:
        raise CheckFailure(Cause.PREMISE,
                           f"{len(prompt_tokens)} prompts of {total} tokens cannot share one step "
                           f"(max_num_seqs={limits['max_num_seqs']}, "
                           f"max_num_batched_tokens={limits['max_num_batched_tokens']})",
                           evidence=arithmetic)
    return arithmetic
