"""Vision workloads: many images of mixed resolutions and long videos, to
push the vision encoder hard in one batch."""
from __future__ import annotations

from fixtures import media
from harness.workloads.chat import image_part, user, video_part
from harness.workloads.request import Request, Workload

PROMPT = "Describe what you see."
# Small, the 896² Gemma default, and extreme aspect ratios both ways.
SHAPES = {"small": (64, 64), "square-896": (896, 896), "very-wide": (1792, 224),
          "very-tall": (224, 1792)}


def _image(shape: str, seed: int) -> dict:
    w, h = SHAPES[shape]
    return image_part(media.encode_image(media.image(w, h, seed=seed), "png"))


def _request(label: str, parts: list[dict], *, images: int = 0, frames: int = 0) -> Request:
    return Request(label, user(*parts, PROMPT), {"images": images, "frames": frames})


def encoder_workload(images_per_prompt: int, *, video_frames: int, videos: int) -> Workload:
    """Single-image prompts (one per shape: the invariance probes), prompts
    full of one shape, a mixed prompt, and videos with many frames."""
    reqs = [_request(f"single-{s}", [_image(s, i)], images=1) for i, s in enumerate(SHAPES)]
    for i, s in enumerate(SHAPES):
        parts = [_image(s, 100 + 10 * i + k) for k in range(images_per_prompt)]
        reqs.append(_request(f"many-{s}", parts, images=images_per_prompt))
    mixed = [_image(s, 200 + i) for i, s in enumerate(list(SHAPES)[:images_per_prompt])]
    reqs.append(_request("mixed", mixed, images=len(mixed)))
    for v in range(videos):
        frames = media.video_frames(video_frames, 320, 240, seed=300 + v)
        reqs.append(_request(f"video{v}-{video_frames}f", [video_part(frames)], frames=video_frames))
    # The family's only workload: its scenario is named after the model alone.
    return Workload("", tuple(reqs), {"workload": {r.label: r.facts for r in reqs}})


# Two videos of different lengths and resolutions (landscape, portrait).
RAGGED_VIDEOS = {"video-8f-320x240": (8, 320, 240), "video-12f-240x400": (12, 240, 400)}


def ragged_video_workload() -> Workload:
    """One prompt per video; batched, their frames meet in one encoder call."""
    reqs = []
    for i, (label, (frames, w, h)) in enumerate(RAGGED_VIDEOS.items()):
        part = video_part(media.video_frames(frames, w, h, seed=400 + i))
        reqs.append(Request(label, user(part, PROMPT), {"frames": frames, "width": w, "height": h}))
    return Workload("ragged-video", tuple(reqs), {"workload": {r.label: r.facts for r in reqs}})
