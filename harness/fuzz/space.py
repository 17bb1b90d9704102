"""The space the fuzzer searches: a workload spec (plain JSON: requests,
their media items and sizes), the limits of one model that bound it, and
the workload a spec becomes.

A spec holds numbers and names only, so hypothesis can shrink it and a
failure can be written down and replayed; media are built from it, the
same bytes every time (each item's content seed comes from its request's
spec, so one request is the same media wherever it is sent).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from fixtures import media
from harness.workloads.chat import audio_part, image_part, user, video_part
from harness.workloads.request import Request, Workload

SPEC_VERSION = 1
MEDIA_KINDS = ("audio", "image", "video")
SILENCE = "silence"
# The crafted adapters a request may run under (harness.workloads.lora): the
# vision tower and connector, the language model's attention.
ADAPTERS = ("tower", "lm")
AUDIO_CONTENTS = (*media.AUDIO_KINDS, SILENCE)
# Tokens a request's chat template and text part take besides its media (a
# bound, checked against the model's own processor in the harness's tests).
TEMPLATE_TOKENS = 40


@dataclass(frozen=True)
class Limits:
    """What one model's engine accepts in one request and in one step: the
    matrix's engine arguments and the model's own processor."""
    model: str                     # the matrix entry's name
    modalities: tuple[str, ...]    # media kinds the entry serves (of MEDIA_KINDS)
    per_prompt: dict               # items of a kind one prompt may carry (limit_mm_per_prompt)
    max_requests: int              # requests in one step the fuzzer sends (within max_num_seqs)
    step_tokens: int               # prompt tokens of one step (max_num_batched_tokens)
    max_model_len: int
    max_audio_s: float             # the longest clip the processor takes whole
    audio_ms_per_token: float | None  # None: every clip has audio_tokens tokens
    audio_tokens: int              # the most tokens a clip becomes
    image_tokens: int              # tokens of one image
    frame_tokens: int              # tokens of one video frame
    max_frames: int                # frames a video keeps after the processor's sampling
    adapters: tuple[str, ...] = ()  # LoRA adapters a request may run under (crafted; empty: no LoRA)

    def to_dict(self) -> dict:
        return dict(self.__dict__, modalities=list(self.modalities), adapters=list(self.adapters))


def limits_for(entry, processor, *, engine_args: dict, max_requests: int = 4) -> Limits:
    """The limits of a matrix entry's model, from the engine arguments its
    family gives it and its processor (`harness.workloads.audio.processor`).
    With LoRA on, requests may run under the crafted adapters."""
    from harness.workloads.audio import max_audio_seconds_of

    args = engine_args
    per_prompt = {k: int(v) for k, v in args.get("limit_mm_per_prompt", {}).items()}
    kinds = tuple(k for k in MEDIA_KINDS if entry.has(k) and per_prompt.get(k, 1) > 0)
    video = getattr(processor, "video_processor", None)
    image_tokens = int(getattr(processor, "image_seq_length", 0) or 0)
    return Limits(
        model=entry.name, modalities=kinds, per_prompt={k: per_prompt.get(k, 1) for k in kinds},
        max_requests=min(max_requests, int(args.get("max_num_seqs", max_requests))),
        step_tokens=int(args.get("max_num_batched_tokens", 2048)),
        max_model_len=int(args.get("max_model_len", 2048)),
        max_audio_s=max_audio_seconds_of(processor) if "audio" in kinds else 0.0,
        audio_ms_per_token=getattr(processor, "audio_ms_per_token", None),
        audio_tokens=int(getattr(processor, "audio_seq_length", 0) or 0),
        image_tokens=image_tokens,
        frame_tokens=int(getattr(video, "max_soft_tokens", 0) or image_tokens),
        max_frames=int(getattr(video, "num_frames", 0) or 8),
        adapters=tuple(a for a in ADAPTERS if args.get("enable_lora")
                       and (a != "tower" or args.get("enable_tower_connector_lora"))))


# --- tokens: the bound a spec is kept within ---------------------------------

def item_tokens(item: dict, limits: Limits) -> int:
    """An upper bound of the prompt tokens one media item becomes."""
    if item["kind"] == "audio":
        if limits.audio_ms_per_token:
            tokens = math.ceil(item["duration_cs"] * 10 / limits.audio_ms_per_token)
            return min(tokens, limits.audio_tokens) + 4
        return limits.audio_tokens + 4
    if item["kind"] == "image":
        return limits.image_tokens + 4
    # A video: each kept frame's tokens, its timestamp text and delimiters.
    return min(item["frames"], limits.max_frames) * (limits.frame_tokens + 16)


def request_tokens(request: dict, limits: Limits) -> int:
    """An upper bound of one request's prompt tokens."""
    return (TEMPLATE_TOKENS + len(request["prompt"].encode())
            + sum(item_tokens(i, limits) for i in request["items"]))


# --- a spec becomes a workload ---------------------------------------------------

def _clip(item: dict, seed: int):
    duration_s, rate, channels = item["duration_cs"] / 100, item["sample_rate"], item["channels"]
    if item["content"] == SILENCE:
        samples = round(duration_s * rate)
        return np.zeros((samples, channels) if channels > 1 else samples, np.float32)
    return media.audio_clip(duration_s, sample_rate=rate, channels=channels, kind=item["content"], seed=seed)


def _part(item: dict, seed: int) -> dict:
    return _built(json.dumps(item, sort_keys=True), seed)


@lru_cache(maxsize=256)
def _built(item_json: str, seed: int) -> dict:
    """One item's content part; kept, since shrinking sends one item in many batches."""
    item = json.loads(item_json)
    kind = item["kind"]
    if kind == "audio":
        return audio_part(media.encode_audio(_clip(item, seed), item["sample_rate"], "wav"))
    if kind == "image":
        return image_part(media.encode_image(media.image(item["width"], item["height"], seed=seed), "png"))
    if kind == "video":
        return video_part(media.video_frames(item["frames"], item["width"], item["height"], seed=seed))
    raise ValueError(f"unknown media kind {kind!r}; known: {MEDIA_KINDS}")


def request_seed(request: dict) -> int:
    return int(hashlib.sha256(canonical(request).encode()).hexdigest()[:7], 16)


def item_label(item: dict) -> str:
    if item["kind"] == "audio":
        rate = "" if item["sample_rate"] == 16000 else f"@{item['sample_rate'] / 1000:g}kHz"
        ch = "" if item["channels"] == 1 else f"x{item['channels']}ch"
        return f"audio{item['duration_cs'] / 100:g}s{rate}{ch}-{item['content']}"
    if item["kind"] == "image":
        return f"image{item['width']}x{item['height']}"
    return f"video{item['frames']}f-{item['width']}x{item['height']}"


def request_label(i: int, request: dict) -> str:
    under = f"@{request['adapter']}" if request.get("adapter") else ""
    return f"r{i}:" + ("+".join(item_label(it) for it in request["items"]) or "text") + under


def workload(spec: dict, name: str = "fuzz", adapters: Callable[[str], object] | None = None) -> Workload:
    """The workload a spec stands for: one request per spec request, its
    media built afresh, seeded by the request's own spec: the same request
    is the same media in any batch and at any place (so its reference is
    computed once), and two requests of a batch differ (the strategies
    draw them unique)."""
    requests = []
    for i, r in enumerate(spec["requests"]):
        seed = request_seed(r)
        parts = [_part(item, seed=seed + j) for j, item in enumerate(r["items"])]
        adapter = r.get("adapter")
        if adapter and adapters is None:
            raise ValueError(f"request {i} runs under adapter {adapter!r}, and no adapters were given")
        requests.append(Request(request_label(i, r), user(*parts, r["prompt"]),
                                {"items": [item_label(it) for it in r["items"]], "adapter": adapter or "base"},
                                adapter=adapters(adapter) if adapter else None))
    return Workload(name, tuple(requests), {"spec": spec})


def shape(spec: dict) -> str:
    """What kind of batch a spec is, for the distribution of shapes tried:
    requests, media per kind, and whether clips of one batch differ in
    length (ragged) or not."""
    if "requests" not in spec:  # one hostile payload (harness.fuzz.hostile)
        return f"1 req · hostile {spec['kind']}"
    items = [it for r in spec["requests"] for it in r["items"]]
    parts = [f"{len(spec['requests'])} req"]
    for kind in MEDIA_KINDS:
        of_kind = [it for it in items if it["kind"] == kind]
        if of_kind:
            parts.append(f"{kind}x{len(of_kind)}")
    durations = {it["duration_cs"] for it in items if it["kind"] == "audio"}
    if len(durations) > 1:
        parts.append("ragged audio")
    under = sorted({r["adapter"] for r in spec["requests"] if r.get("adapter")})
    if under:
        parts.append("lora " + "+".join(under))
    return " · ".join(parts)


def canonical(spec: dict) -> str:
    """One text per spec: the key of a verdict already reached."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
