"""The calibration's own workloads, disjoint from every check's: media of
durations, sizes, frame counts and seeds no scenario sends, and prompts of
their own. Noise measured on the checks' own inputs would be tuned to
them; these only share their kinds (ragged clips, images of several sizes
and aspect ratios, several images in one prompt, a video, text).
"""
from __future__ import annotations

from fixtures import media
from harness.engines.base import LoraAdapter
from harness.workloads.audio import SAMPLE_RATE, Clip
from harness.workloads.chat import audio_part, image_part, user, video_part
from harness.workloads.request import Request, Workload

# Seeds above every scenario's (theirs stay under 1,000).
SEED = 90_000
AUDIO_S = (1.7, 4.3, 8.9, 2.6)
IMAGES = {"landscape": (160, 96), "portrait": (88, 200), "square": (336, 336), "strip": (480, 72)}
VIDEO = (6, 176, 144)
TEXTS = ("Name four rivers and the seas they reach.",
         "Why does a kettle whistle?",
         "Write two lines about a lighthouse.")
# The 4-bit path is text only, and TP's noise is heavy-tailed: more prompts,
# so their bounds rest on more positions than three answers give.
MORE_TEXTS = TEXTS + ("How is paper made from wood?",
                          "Describe a busy market at dawn.",
                          "What makes dough rise?",
                          "Explain a lunar eclipse to a child.",
                          "List three uses of copper.")
PROMPTS = {"audio": "Say what this recording holds.", "image": "What is in this picture?",
           "video": "Describe this clip.", "images": "Compare these pictures."}


def _image(size: tuple[int, int], seed: int) -> dict:
    return image_part(media.encode_image(media.image(*size, seed=SEED + seed), "png"))


def requests(modalities: tuple[str, ...] | list[str], image_limit: int = 1,
             texts: tuple[str, ...] = TEXTS) -> list[Request]:
    """Of each of these modalities: four clips of different lengths, four
    images of different shapes (and, where a prompt may hold several, one
    prompt of three), a video, the texts (three unless given)."""
    reqs: list[Request] = []
    if "audio" in modalities:
        for i, seconds in enumerate(AUDIO_S):
            clip = Clip(seconds, media.audio_clip(seconds, sample_rate=SAMPLE_RATE, seed=SEED + i, kind="tone"))
            reqs.append(Request(f"audio{i}:{clip.label}", user(audio_part(clip.wav()), PROMPTS["audio"]),
                                {"duration_s": seconds}))
    if "image" in modalities:
        for i, (shape, size) in enumerate(IMAGES.items()):
            reqs.append(Request(f"image{i}:{shape}", user(_image(size, 10 + i), PROMPTS["image"]),
                                {"size": list(size)}))
        if image_limit >= 3:
            parts = [_image(size, 20 + i) for i, size in enumerate(list(IMAGES.values())[:3])]
            reqs.append(Request("images3", user(*parts, PROMPTS["images"]), {"images": 3}))
    if "video" in modalities:
        frames, width, height = VIDEO
        reqs.append(Request(f"video:{frames}f", user(video_part(media.video_frames(frames, width, height,
                                                                                   seed=SEED + 30)),
                                                     PROMPTS["video"]), {"frames": frames}))
    if "text" in modalities:
        reqs += _texts(texts)
    return reqs


def _texts(texts: tuple[str, ...]) -> list[Request]:
    return [Request(f"text{i}", user(text), {"chars": len(text)}) for i, text in enumerate(texts)]


def _workload(name: str, reqs: list[Request]) -> Workload:
    return Workload(f"calibration-{name}", tuple(reqs), {"workload": {r.label: r.facts for r in reqs}})


def workload(name: str, modalities, image_limit: int = 1, texts: tuple[str, ...] = TEXTS) -> Workload:
    return _workload(name, requests(modalities, image_limit, texts))


def four_bit_texts() -> Workload:
    return _workload("4bit", _texts(MORE_TEXTS))


def images(image_limit: int) -> Workload:
    """Prompts of several images each, for the encoder's passes: what
    chunking splits."""
    per = max(1, min(image_limit, 3))
    reqs = [Request(f"images{i}", user(*[_image(size, 40 + 10 * i + k)
                                          for k, size in enumerate(list(IMAGES.values())[:per])],
                                        PROMPTS["images"]), {"images": per}) for i in range(3)]
    return Workload("calibration-images", tuple(reqs), {"workload": {r.label: r.facts for r in reqs}})


def with_adapters(work: Workload, adapters: list[LoraAdapter | None]) -> Workload:
    """The workload's requests under the adapters in turn (the base model
    where None): a mixed-adapter batch."""
    reqs = [Request(f"{r.label}@{a.name if a else 'base'}", r.conversation, r.facts, r.source, a)
            for r, a in zip(work.requests, [adapters[i % len(adapters)] for i in range(len(work.requests))])]
    return Workload(f"{work.name}-lora", tuple(reqs), {"workload": {r.label: r.facts for r in reqs}})
