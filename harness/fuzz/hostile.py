"""Hostile payloads: one request each, sent through the server, that the
engine must refuse with a 4xx and a message, or (beyond the model's
limits) refuse or cap. Each kind is a spec of numbers (shrinkable, written
down, replayed) and the payload it builds:

  truncated-wav   a WAV cut short: its header promises samples that are not there
  truncated-png   a PNG cut short
  random-bytes    bytes that are no container, labelled audio/wav or image/png
  lying-mime      a real PNG labelled audio/wav, a real WAV labelled image/png
  beyond-longest  a clip longer than the model's longest, at any rate from
                  8 kHz to 192 kHz, with up to 8 channels

`invalid_because` says, from the bytes alone and the model's limits, why a
payload is invalid: the harness's tests hold every draw to it.
"""
from __future__ import annotations

import io
import struct

import numpy as np
import soundfile
from hypothesis import strategies as st
from PIL import Image

from fixtures import media
from harness.checks.requests import REFUSE, REFUSE_OR_CAP
from harness.fuzz.space import SPEC_VERSION, Limits
from harness.workloads.chat import audio_part, audio_url_part, image_part, user
from harness.workloads.request import Request, Workload

KINDS = ("truncated-wav", "truncated-png", "random-bytes", "lying-mime", "beyond-longest")
PROMPT = "What is this?"
# Beyond the longest clip: the supported rates, and extreme ones either side.
EXTREME_RATES = (*media.SUPPORTED_SAMPLE_RATES, 4000, 96000, 192000)
MAX_CHANNELS = 8
# The longest allowed clip: what a capped answer is held to.
LONGEST = "longest-allowed"


def payloads(kind: str, limits: Limits) -> st.SearchStrategy[dict]:
    """Specs of one hostile kind, for one model."""
    base = {"version": st.just(SPEC_VERSION), "model": st.just(limits.model), "kind": st.just(kind)}
    if kind == "truncated-wav":
        extra = {"duration_cs": st.integers(10, 1200), "keep_permille": st.integers(1, 990)}
    elif kind == "truncated-png":
        extra = {"width": st.integers(8, 512), "height": st.integers(8, 512), "keep_permille": st.integers(1, 990)}
    elif kind == "random-bytes":
        extra = {"size": st.integers(0, 4096), "as": st.sampled_from(("audio", "image")),
                 "seed": st.integers(0, 2 ** 16)}
    elif kind == "lying-mime":
        extra = {"real": st.sampled_from(("image", "audio"))}
    elif kind == "beyond-longest":
        longest = int(limits.max_audio_s * 100)
        extra = {"duration_cs": st.integers(longest + 1, longest + 3000),
                 "sample_rate": st.sampled_from(EXTREME_RATES), "channels": st.integers(1, MAX_CHANNELS)}
    else:
        raise ValueError(f"unknown hostile kind {kind!r}; known: {KINDS}")
    # Some cuts leave a valid container (an 8x8 PNG cut at 89.7 % lost only
    # its end chunk, and PIL read it whole: the fuzzer shrank to it and
    # called the engine's answer wrong). Never draw those.
    return st.fixed_dictionaries({**base, **extra}).filter(lambda spec: invalid_because(spec, limits) is not None)


def _wav(duration_s: float, rate: int = 16000, channels: int = 1, seed: int = 7) -> bytes:
    """16-bit PCM WAV at any rate (soundfile writes rates fixtures.media refuses)."""
    samples = media.audio_clip(duration_s, sample_rate=16000, channels=channels, seed=seed)
    n = max(1, round(duration_s * rate))
    # The 16 kHz clip stretched onto the target rate's grid: the same sound.
    picked = samples[np.minimum((np.arange(n) * 16000 / rate).astype(int), len(samples) - 1)]
    buffer = io.BytesIO()
    soundfile.write(buffer, picked, rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def _png(width: int, height: int) -> bytes:
    return media.encode_image(media.image(width, height, seed=7), "png")


def payload(spec: dict) -> tuple[bytes, str]:
    """The bytes a spec stands for, and the MIME type they are sent as."""
    kind = spec["kind"]
    if kind == "truncated-wav":
        data = _wav(spec["duration_cs"] / 100)
        return data[: max(1, len(data) * spec["keep_permille"] // 1000)], "audio/wav"
    if kind == "truncated-png":
        data = _png(spec["width"], spec["height"])
        return data[: max(1, len(data) * spec["keep_permille"] // 1000)], "image/png"
    if kind == "random-bytes":
        data = np.random.default_rng(spec["seed"]).bytes(spec["size"])
        return data, "audio/wav" if spec["as"] == "audio" else "image/png"
    if kind == "lying-mime":
        return (_png(64, 64), "audio/wav") if spec["real"] == "image" else (_wav(2.0), "image/png")
    if kind == "beyond-longest":
        return _wav(spec["duration_cs"] / 100, spec["sample_rate"], spec["channels"]), "audio/wav"
    raise ValueError(f"unknown hostile kind {kind!r}; known: {KINDS}")


def expected(spec: dict) -> str:
    """The outcome the engine owes: a refusal, or for a clip beyond the
    longest, a refusal or an answer capped at the longest clip's tokens."""
    return REFUSE_OR_CAP if spec["kind"] == "beyond-longest" else REFUSE


def label(spec: dict) -> str:
    fields = "-".join(f"{k}={v}" for k, v in sorted(spec.items()) if k not in ("version", "model", "kind"))
    return f"{spec['kind']}:{fields}"


def workload(spec: dict) -> Workload:
    data, mime = payload(spec)
    part = audio_url_part(data, mime) if mime.startswith("audio/") else image_part(data, mime)
    return Workload("fuzz-hostile", (Request(label(spec), user(part, PROMPT), {"input": label(spec)}),),
                    {"spec": spec})


def longest_workload(limits: Limits) -> Workload:
    """The longest clip the model takes whole, at 16 kHz mono."""
    clip = media.audio_clip(limits.max_audio_s, seed=7)
    return Workload("fuzz-hostile", (Request(LONGEST, user(audio_part(media.encode_audio(clip, 16000)), PROMPT)),))


def invalid_because(spec: dict, limits: Limits) -> str | None:
    """Why the payload is invalid, judged from its bytes (and the model's
    longest clip); None: it is not (a draw the strategy must never make)."""
    data, mime = payload(spec)
    if mime.startswith("audio/"):
        promised = _wav_data_promised(data)
        if promised is not None and promised > len(data) - 44:
            return f"the WAV header promises {promised} bytes of samples, {len(data) - 44} are there"
        try:
            info = soundfile.info(io.BytesIO(data))
        except Exception as e:  # noqa: BLE001 (libsndfile's refusal, whatever its type)
            return f"not audio: {type(e).__name__}"
        if info.duration > limits.max_audio_s:
            return f"{info.duration:.2f} s, beyond the longest {limits.max_audio_s} s"
        return None
    try:
        with Image.open(io.BytesIO(data)) as picture:
            picture.load()
    except Exception as e:  # noqa: BLE001 (PIL's refusal, whatever its type)
        return f"not an image: {type(e).__name__}"
    return None


def _wav_data_promised(data: bytes) -> int | None:
    """The size the canonical WAV header's data chunk states, if it has one."""
    if len(data) < 44 or data[:4] != b"RIFF" or data[36:40] != b"data":
        return None
    return struct.unpack("<I", data[40:44])[0]
