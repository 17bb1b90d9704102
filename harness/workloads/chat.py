"""OpenAI chat content parts for media, the same for offline and server engines.

Media bytes come from fixtures.media (encode_audio, encode_image). Both
drivers take OpenAI-style conversations, so a clip's solo output from
the offline engine and from the server come from the same prompt.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json

import numpy as np


def audio_part(data: bytes, fmt: str = "wav") -> dict:
    """An `input_audio` part carrying encoded audio bytes (possibly hostile)."""
    return {"type": "input_audio",
            "input_audio": {"data": base64.b64encode(data).decode(), "format": fmt}}


def audio_url_part(data: bytes, mime: str) -> dict:
    """An `audio_url` data URL: lets a scenario lie about the mime type."""
    return {"type": "audio_url",
            "audio_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}}


def image_part(png_or_jpeg: bytes, mime: str = "image/png") -> dict:
    return {"type": "image_url",
            "image_url": {"url": f"data:{mime};base64,{base64.b64encode(png_or_jpeg).decode()}"}}


def video_part(frames: np.ndarray, quality: int = 90) -> dict:
    """Frames (T, H, W, 3) uint8 as vLLM's `video/jpeg` data URL: JPEG frames, comma-joined."""
    from PIL import Image

    encoded = []
    for frame in frames:
        buf = io.BytesIO()
        Image.fromarray(frame).save(buf, format="JPEG", quality=quality)
        encoded.append(base64.b64encode(buf.getvalue()).decode())
    return {"type": "video_url", "video_url": {"url": "data:video/jpeg;base64," + ",".join(encoded)}}


def user(*parts: dict | str) -> list[dict]:
    """One user turn: strings become text parts."""
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return [{"role": "user", "content": content}]


MEDIA_PARTS = ("input_audio", "audio_url", "image_url", "video_url")


def media_items(conversation: list[dict]) -> int:
    """Media parts in a conversation: what the engine's encoders are sent."""
    return sum(1 for m in conversation if isinstance(m.get("content"), list)
               for p in m["content"] if isinstance(p, dict) and p.get("type") in MEDIA_PARTS)


def with_uuids(conversation: list[dict], tag: str) -> list[dict]:
    """The same conversation with every media part named `tag-<n>`. vLLM keys
    its encoder and processor caches, and the multimodal part of its prefix
    cache, on this name instead of the media's hash: a fresh tag can never be
    served from what another request left behind."""
    out, n = [], 0
    for message in conversation:
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, dict) and part.get("type") in MEDIA_PARTS:
                    part, n = {**part, "uuid": f"{tag}-{n}"}, n + 1
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def with_content_uuids(conversation: list[dict], tag: str) -> list[dict]:
    """Every media part named `tag-<hash of its content>`: the same media get
    the same name under the same tag, in any request and any batch."""
    out = []
    for message in conversation:
        content = message.get("content")
        if isinstance(content, list):
            content = [{**p, "uuid": f"{tag}-{_digest(p)}"}
                       if isinstance(p, dict) and p.get("type") in MEDIA_PARTS else p for p in content]
            message = {**message, "content": content}
        out.append(message)
    return out


def _digest(part: dict) -> str:
    return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]
