"""Audio workloads: clips of given durations as chat requests, edge and
hostile inputs, and the facts a scenario's premise guard needs (samples,
feature frames, limits)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from fixtures import media
from harness.verdicts import Cause, CheckFailure
from harness.workloads.chat import audio_part, audio_url_part, user
from harness.workloads.request import Request, Workload

SAMPLE_RATE = 16000
PROMPT = "What do you hear?"
BASE_DURATIONS_S = (1.0, 3.5, 7.0, 12.0)


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


def clip_workload(name: str, durations: list[float]) -> Workload:
    """One request per clip, labelled with its place and duration."""
    clips_ = clips(durations)
    return Workload(name, tuple(Request(f"clip{i}:{c.label}", c.conversation(),
                                        {"duration_s": c.duration_s, "samples": len(c.samples)}, c)
                                for i, c in enumerate(clips_)),
                    {"durations_s": [c.duration_s for c in clips_]})


def concurrent_durations(n: int) -> list[float]:
    """n distinct durations: the base set, then shifted by half a second per round."""
    return [BASE_DURATIONS_S[i % 4] + 0.5 * (i // 4) for i in range(n)]


def processor(model: str):
    """The model's own processor. One that cannot be loaded (no hub, a
    broken checkout) is the same root cause as an engine that cannot load
    the model, and is reported as such."""
    try:
        return _processor(model)
    except OSError as e:
        raise CheckFailure(Cause.STARTUP_FAILED, f"the processor of {model} did not load: {e}") from None


@lru_cache(maxsize=8)
def _processor(model: str):
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


def guard_workload_lengths(model: str, workload: Workload, *, distinct: bool) -> dict:
    """guard_lengths on a clip workload, in the model's own feature frames."""
    clips_ = [r.source for r in workload.requests]
    return guard_lengths(clips_, [feature_frames(model, c) for c in clips_], distinct=distinct)


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


# --- edge and hostile inputs, one request each ---------------------------------

def _clip_part(duration_s: float, *, sample_rate: int = SAMPLE_RATE, channels: int = 1,
               kind: str = "sweep") -> dict:
    samples = media.audio_clip(duration_s, sample_rate=sample_rate, channels=channels, kind=kind, seed=7)
    return audio_part(media.encode_audio(samples, sample_rate, "wav"))


def _silence() -> dict:
    return audio_part(media.encode_audio(np.zeros(2 * SAMPLE_RATE, np.float32), SAMPLE_RATE))


def _truncated_wav() -> dict:
    wav = media.encode_audio(media.audio_clip(2.0, seed=7), SAMPLE_RATE, "wav")
    return audio_part(wav[: len(wav) // 2])  # the header still promises two seconds


EDGE_INPUTS: dict[str, Callable[[str], dict]] = {
    "0.05s": lambda model: _clip_part(0.05),
    "silence": lambda model: _silence(),
    "stereo": lambda model: _clip_part(2.0, channels=2),
    "8kHz": lambda model: _clip_part(2.0, sample_rate=8000),
    "44.1kHz": lambda model: _clip_part(2.0, sample_rate=44100),
    "longest-allowed": lambda model: _clip_part(max_audio_seconds(model)),
    "beyond-longest": lambda model: _clip_part(max_audio_seconds(model) + 5.0),
    "truncated-wav": lambda model: _truncated_wav(),
    "random-bytes-as-wav": lambda model: audio_part(np.random.default_rng(7).bytes(4096)),
    "empty-payload": lambda model: audio_part(b""),
    "image-as-audio": lambda model: audio_url_part(
        media.encode_image(media.image(64, 64, seed=7)), "audio/wav"),
}


def edge_workload(model: str, name: str) -> Workload:
    """One edge or hostile input; all of them share the family's `edge` scenario."""
    return Workload("edge", (Request(name, user(EDGE_INPUTS[name](model), PROMPT), {"input": name}),))


def truncation(beyond, longest, model: str) -> dict:
    """Whether a clip beyond the longest allowed was cut to it: recorded
    either way, from the prompt tokens of both answers."""
    got, limit = beyond[0], longest[0]
    return {"max_audio_s": max_audio_seconds(model),
            "prompt_tokens": getattr(got, "prompt_token_count", None),
            "longest_allowed_prompt_tokens": getattr(limit, "prompt_token_count", None),
            "silently_truncated": getattr(got, "prompt_token_count", None) ==
            getattr(limit, "prompt_token_count", None)}
