"""Audio workloads: clips of given durations as chat requests, edge and
hostile inputs, and the facts a scenario's premise guard needs (samples,
feature frames, limits)."""
from __future__ import annotations

import base64
import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from fixtures import media
from harness.checks.requests import ANSWER, REFUSE, REFUSE_OR_CAP
from harness.verdicts import Cause, CheckFailure
from harness.workloads.chat import audio_part, audio_url_part, user
from harness.workloads.request import Request, Workload

SAMPLE_RATE = 16000
PROMPT = "What do you hear?"
# Clips in the ragged batch (its checks' `clip` ids), unless --audio-durations names others.
RAGGED_CLIPS = 4
# Peak levels of a workload's clips, in turn: five beside the three kinds, so
# that no two of 15 clips in a row share both.
LEVELS = (0.5, 0.2, 0.8, 0.35, 0.65)


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


def clips(durations: list[float], *, seed: int = 0) -> list[Clip]:
    """Seeded clips, each of its own content: a seed of its own, the kinds in
    turn (a sweep, a tone, noise) and the levels in turn. Clips of one
    duration, or of near ones, then differ enough that a noisy host's
    tolerance still tells their answers apart (power): on tiny-gemma3n two
    sweeps of one length did not, nor a 4.5 s sweep and a 5 s tone."""
    return [Clip(d, media.audio_clip(d, sample_rate=SAMPLE_RATE, seed=seed + i,
                                     kind=media.AUDIO_KINDS[i % len(media.AUDIO_KINDS)],
                                     amplitude=LEVELS[i % len(LEVELS)]))
            for i, d in enumerate(durations)]


def clip_workload(name: str, durations: list[float]) -> Workload:
    """One request per clip, labelled with its place and duration."""
    clips_ = clips(durations)
    return Workload(name, tuple(Request(f"clip{i}:{c.label}", c.conversation(),
                                        {"duration_s": c.duration_s, "samples": len(c.samples)}, c)
                                for i, c in enumerate(clips_)),
                    {"durations_s": [c.duration_s for c in clips_]})


# --- durations from the model's own limits -----------------------------------------

@dataclass(frozen=True)
class AudioLimits:
    """What a model's processor says of clip lengths: the longest clip it
    takes whole, the window it pads or cuts every clip to (Whisper's
    `chunk_length`; None where clips keep their own length), and one
    feature frame (the feature extractor's hop)."""
    longest_s: float
    window_s: float | None
    frame_s: float


def audio_limits(model: str, context_tokens: int | None = None) -> AudioLimits:
    return audio_limits_of(processor(model), max_audio_seconds(model, context_tokens))


def audio_limits_of(proc, longest_s: float | None = None) -> AudioLimits:
    fe = getattr(proc, "feature_extractor", None) or proc.audio_processor
    window = getattr(fe, "chunk_length", None)
    hop = getattr(fe, "hop_length", None)
    return AudioLimits(longest_s if longest_s is not None else max_audio_seconds_of(proc),
                       float(window) if isinstance(window, (int, float)) else None,
                       hop / fe.sampling_rate if isinstance(hop, int) and hop > 0 else 0.01)


# The shortest clip of a ragged batch, in feature frames (0.5 s at a 10 ms
# hop): well past the few milliseconds that make no encoder frame (the edge
# family's `0.05s`, finding 011), so that the batch is answered and judged.
SHORT_FRAMES = 50


def ragged_durations(limits: AudioLimits, n: int) -> list[float]:
    """n distinct durations (n >= 2) from the model's own limits: from a clip
    SHORT_FRAMES frames long to one as much short of the longest clip the
    model takes whole, evenly between, each to 0.1 s and one sample more, so
    that every clip ends just past a frame's edge, where a placeholder count
    that rounds the frames wrong is one short (vLLM #47652). Where every
    clip is cut into windows shorter than the longest, two of them straddle
    the window's edge, just under and just over it."""
    margin = round(SHORT_FRAMES * limits.frame_s, 1)
    low, high = margin, limits.longest_s - margin
    durations = [round(low + (high - low) * i / (n - 1), 1) for i in range(n)]
    window = limits.window_s
    if window is not None and low < window - margin and window + margin < high and n >= 4:
        durations[n // 2 - 1:n // 2 + 1] = [round(window - margin, 1), round(window + margin, 1)]
    if len(set(durations)) != n:
        raise ValueError(f"{n} distinct clip durations do not fit between {low} s and {high} s")
    return [d + 1 / SAMPLE_RATE for d in sorted(durations)]


# A load's clips are at most this long: clips of much the same preprocessing
# time, so that concurrent requests reach the scheduler together (clips of
# 0.5 to 29.5 s on Qwen2.5-Omni, and of 0.5 to 47 s on GLM-ASR, arrived one
# by one and were never served together; up to 9.5 s, every model's were,
# the window-padding ones' (Omni, AudioFlamingo3, GLM-ASR) at a rerun).
LOAD_LONGEST_S = 10.0


def concurrent_durations(limits: AudioLimits, n: int) -> list[float]:
    """n distinct durations for a concurrent load, spread as the ragged
    batch's up to LOAD_LONGEST_S (or the model's longest, if shorter)."""
    return ragged_durations(AudioLimits(min(limits.longest_s, LOAD_LONGEST_S), None, limits.frame_s), n)


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


class NoStatedLimit(ValueError):
    """The processor states no longest clip."""


# Room a context-bound clip leaves for the rest of its prompt and the answer.
PROMPT_ROOM_TOKENS = 256


def max_audio_seconds(model: str, context_tokens: int | None = None) -> float:
    """The longest clip the model takes whole: what its processor states
    (the feature extractor's truncation length, Gemma4's audio token
    budget, a processor's `max_audio_len`), and, given the engine's context
    (`max_model_len`), no longer than the clip whose placeholder tokens fill
    it, less PROMPT_ROOM_TOKENS. A Whisper-style window is not a limit:
    some engines cut a clip there, others (vLLM's Qwen2.5-Omni) take it whole."""
    proc = processor(model)
    try:
        stated = max_audio_seconds_of(proc)
    except NoStatedLimit:
        if context_tokens is None:
            raise
        stated = float("inf")
    if context_tokens is None:
        return stated
    return min(stated, context_bound_seconds(proc, context_tokens - PROMPT_ROOM_TOKENS))


def audio_token_id(proc) -> int:
    """The id of the model's audio placeholder token."""
    return proc.tokenizer.convert_tokens_to_ids(proc.audio_token)


# Processors that take audio through their chat template only, refusing it
# beside text in __call__: Voxtral's, whose prompt mistral_common renders
# (vLLM's too, with tokenizer_mode "mistral").
AUDIO_THROUGH_TEMPLATE = ("VoxtralProcessor",)


def audio_tokens(proc, samples: int) -> int:
    """The placeholder tokens the model's processor puts in a prompt for one
    clip of this many 16 kHz samples."""
    clip = np.zeros(samples, np.float32)
    if type(proc).__name__ in AUDIO_THROUGH_TEMPLATE:
        wav = base64.b64encode(media.encode_audio(clip, SAMPLE_RATE, "wav")).decode("ascii")
        ids = proc.apply_chat_template([{"role": "user", "content": [{"type": "audio", "base64": wav},
                                                                      {"type": "text", "text": PROMPT}]}],
                                       return_tensors="pt")["input_ids"][0]
    else:
        prompt = proc.apply_chat_template([{"role": "user", "content": [{"type": "audio"}]}],
                                          add_generation_prompt=True, tokenize=False)
        ids = proc(text=prompt, audio=[clip], sampling_rate=SAMPLE_RATE, return_tensors="pt")["input_ids"][0]
    return int((ids == audio_token_id(proc)).sum())


def context_bound_seconds(proc, tokens: int) -> float:
    """The longest clip, to 0.1 s, whose placeholders are at most `tokens`,
    bisected in tenths of a second up to twice the estimate from a 10 s
    clip's rate; where the processor cuts clips shorter (Qwen2-Audio at its
    30 s window), the shortest clip it cuts to its most tokens."""
    # Each length is asked once: the bound, the cap and the bisection meet the same ones again.
    count = lru_cache(maxsize=None)(lambda tenths: audio_tokens(proc, tenths * SAMPLE_RATE // 10))
    high = 2 * int(tokens / (count(100) / 10.0) * 10)
    # A 10 s clip's rate understates the longest where clips are padded to
    # windows (Voxtral: a 30 s window's 375 tokens for it): double while the count still grows.
    while count(high) <= tokens and count(2 * high) > count(high):
        high *= 2
    if count(high) <= tokens:  # it cuts clips short of the context: the longest is where its count stops
        cap = count(high)
        if count(1) == cap:  # a count that does not grow with the clip (Gemma3n: 188): no context binds it
            return float("inf")
        fits = lambda tenths: count(tenths) < cap  # noqa: E731
    else:
        fits = lambda tenths: count(tenths) <= tokens  # noqa: E731
    low = 0
    while high - low > 1:  # fits(low), not fits(high)
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return high / 10 if count(high) <= tokens else low / 10


def max_audio_seconds_of(proc) -> float:
    """`max_audio_seconds` of a loaded processor, where it states one."""
    fe = getattr(proc, "feature_extractor", None) or proc.audio_processor
    limits = []
    default = inspect.signature(fe.__call__).parameters.get("max_length")
    if default is not None and isinstance(default.default, int):
        limits.append(default.default / fe.sampling_rate)
    max_audio_len = getattr(proc, "max_audio_len", None)  # AudioFlamingo3, GLM-ASR: windows up to this
    if isinstance(max_audio_len, (int, float)) and max_audio_len > 0:
        limits.append(float(max_audio_len))
    tokens, ms = getattr(proc, "audio_seq_length", None), getattr(proc, "audio_ms_per_token", None)
    if tokens and ms:
        limits.append(tokens * ms / 1000)
    if not limits:
        raise NoStatedLimit(f"{type(proc).__name__}: the processor states no audio length limit")
    return min(limits)


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


@dataclass(frozen=True)
class Edge:
    """An edge or hostile input, and the outcome it must get (see
    harness.checks.requests.check_edge_outcome); `held_to` names the input whose
    prompt tokens it is compared with."""
    part: Callable[[float], dict]  # of the model's longest clip, in seconds
    expect: str
    held_to: str | None = None
    # A clip of this many samples: where the model's own processor makes no
    # placeholder of it (GLM-ASR's shortest clip is longer), a 4xx is its due.
    samples: int | None = None

    def expect_for(self, proc) -> str:
        """What this input must get from the model whose processor is `proc`."""
        if self.samples is not None and audio_tokens(proc, self.samples) == 0:
            return REFUSE
        return self.expect


# The same two seconds as 16 kHz mono: what a resampled clip must come to.
TWO_SECONDS_16K = "2s-16kHz-mono"
REFERENCE_INPUTS: dict[str, Callable[[float], dict]] = {
    TWO_SECONDS_16K: lambda longest: _clip_part(2.0),
    "longest-allowed": lambda longest: _clip_part(longest),
}
EDGE_INPUTS: dict[str, Edge] = {
    "0.05s": Edge(lambda longest: _clip_part(0.05), ANSWER, samples=round(0.05 * SAMPLE_RATE)),
    "silence": Edge(lambda longest: _silence(), ANSWER),
    "stereo": Edge(lambda longest: _clip_part(2.0, channels=2), ANSWER),
    "8kHz": Edge(lambda longest: _clip_part(2.0, sample_rate=8000), ANSWER, TWO_SECONDS_16K),
    "44.1kHz": Edge(lambda longest: _clip_part(2.0, sample_rate=44100), ANSWER, TWO_SECONDS_16K),
    "longest-allowed": Edge(REFERENCE_INPUTS["longest-allowed"], ANSWER),
    # Past the longest by a quarter and 5 s: where the context bounds it, past the context too.
    "beyond-longest": Edge(lambda longest: _clip_part(longest * 1.25 + 5.0), REFUSE_OR_CAP,
                           "longest-allowed"),
    "truncated-wav": Edge(lambda longest: _truncated_wav(), REFUSE),
    "random-bytes-as-wav": Edge(lambda longest: audio_part(np.random.default_rng(7).bytes(4096)), REFUSE),
    "empty-payload": Edge(lambda longest: audio_part(b""), REFUSE),
    "image-as-audio": Edge(lambda longest: audio_url_part(
        media.encode_image(media.image(64, 64, seed=7)), "audio/wav"), REFUSE),
}


def edge_workload(name: str, longest_s: float) -> Workload:
    """One edge, hostile or reference input, for a model whose longest clip
    is `longest_s`; all share the family's `edge` scenario."""
    part = EDGE_INPUTS[name].part if name in EDGE_INPUTS else REFERENCE_INPUTS[name]
    return Workload("edge", (Request(name, user(part(longest_s), PROMPT), {"input": name}),))
