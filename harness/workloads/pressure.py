"""The aborts-and-preemption workload: multimodal requests, each with media
of its own, sent at once to a server whose KV cache holds fewer of them
than are sent, so the scheduler preempts some and resumes them later; and
the clients that go away mid-stream (half of them, early in their answers).

Media come first in each prompt and differ between requests (images of one
size and other content, clips of other durations), so that no request can
pass with another's answer, and the power check has answers to reject."""
from __future__ import annotations

from fixtures import media
from harness.workloads.chat import audio_part, image_part, user
from harness.workloads.request import Request, Workload

PROMPT = "Describe it in a few plain words: what stands out first, then what changes, then what is odd."
IMAGE_SIZE = (160, 120)
CLIPS_S = (4.0, 6.0)
# The clients that go away do so once the engine has run their request for
# this many steps (its prefill and a first decode: it holds KV blocks and
# has output), as the in-engine observer shows: every other request.
LEAVE_AFTER_STEPS = 2


def pressure_workload(modalities) -> Workload:
    """Two images of one size and two clips of different durations, as far
    as the model takes each kind: `image-1`, `image-2`, `audio-4s`, `audio-6s`."""
    requests = []
    if "image" in modalities:
        for n in (1, 2):
            part = image_part(media.encode_image(media.image(*IMAGE_SIZE, seed=8100 + n)))
            requests.append(Request(f"image-{n}", user(part, PROMPT), {"modality": "image", "seed": 8100 + n}))
    if "audio" in modalities:
        for n, seconds in enumerate(CLIPS_S):
            part = audio_part(media.encode_audio(media.audio_clip(seconds, seed=8200 + n, kind="sweep"), 16000))
            requests.append(Request(f"audio-{seconds:g}s", user(part, PROMPT),
                                    {"modality": "audio", "duration_s": seconds}))
    if len(requests) < 2:
        raise ValueError(f"the aborts-and-preemption workload sends images or audio; the model has "
                         f"{sorted(modalities)}")
    return Workload("pressure", tuple(requests), {"workload": {r.label: r.facts for r in requests}})


def abandon_plan(workload: Workload) -> list[int | None]:
    """Per request, after how many of its engine steps its client goes away
    (None: it stays to the end): every other request, starting with the first."""
    return [LEAVE_AFTER_STEPS if i % 2 == 0 else None for i in range(len(workload.requests))]
