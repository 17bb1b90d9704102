"""The cache matrix's workload: per media kind of the model, two items of
one size and different content, under two prompts. Sent twice in a cell,
the second round is identical repeats; within a round, two requests share
a prompt and differ in media (vLLM #20261 gave them garbled answers) and
two share media under different prompts (the processor, encoder and
prefix caches may serve the second from the first).

Media come first in each prompt, so a request's prefix-cache blocks start
with its media: a repeat hits them, and the pair that shares only the
prompt must not. Clips are the model's longest, its largest item: the
encoder cache of a cell whose batched-token budget is near the largest
item holds about one of them."""
from __future__ import annotations

from fixtures import media
from harness.workloads.chat import audio_part, image_part, user
from harness.workloads.request import Request, Workload

# Long enough that an image's prompt fills a prefix-cache block of its own
# (128 tokens on the CPU tier), so that a repeat can hit it.
PROMPTS = {"p1": "Describe what this shows in a few plain words, as you would to a friend who cannot see "
                 "or hear it: first the whole of it, then the parts that stand out, then anything that seems "
                 "odd or out of place, and last of all how it makes you feel and why. Keep each part short, "
                 "plain and concrete, and leave out nothing that a careful listener would want to know.",
           "p2": "Say what you notice first about it, then what you notice next, and go on in that order "
                 "until nothing is left: its shape or its sound, its colours or its pitch, whatever changes "
                 "in it over time or across it, and what it reminds you of. Answer in short sentences, one "
                 "thing to each, and do not repeat yourself or guess at what is not there."}
IMAGE_SIZE = (160, 120)
KINDS = ("image", "audio")


def _item(kind: str, seed: int, clip_s: float) -> dict:
    if kind == "image":
        return image_part(media.encode_image(media.image(*IMAGE_SIZE, seed=seed)))
    return audio_part(media.encode_audio(media.audio_clip(clip_s, seed=seed, kind="sweep"), 16000))


def largest_item_tokens(proc, modalities) -> int:
    """The prompt tokens of the largest item the workload sends: an image at
    the processor's most tokens, or its longest clip."""
    sizes = {"image": getattr(proc, "image_seq_length", 0), "audio": getattr(proc, "audio_seq_length", 0)}
    return max(int(sizes[k] or 0) for k in KINDS if k in modalities)


def cache_workload(modalities, longest_clip_s: float) -> Workload:
    """For each of image and audio the model serves: `<kind>-a:p1`,
    `<kind>-b:p1` (same prompt, other media) and `<kind>-a:p2` (same
    media, other prompt). Clips last `longest_clip_s`, the model's longest."""
    kinds = [k for k in KINDS if k in modalities]
    if not kinds:
        raise ValueError(f"the cache matrix sends images or audio; the model has {sorted(modalities)}")
    requests = []
    for k, kind in enumerate(kinds):
        items = {"a": _item(kind, 7000 + 10 * k, longest_clip_s), "b": _item(kind, 7001 + 10 * k, longest_clip_s)}
        size = f"{IMAGE_SIZE[0]}x{IMAGE_SIZE[1]}" if kind == "image" else f"{longest_clip_s:g}s"
        for name, prompt in (("a", "p1"), ("b", "p1"), ("a", "p2")):
            requests.append(Request(f"{kind}-{name}:{prompt}", user(items[name], PROMPTS[prompt]),
                                    {"modality": kind, "media": name, "size": size, "prompt": prompt}))
    return Workload("cache", tuple(requests), {"workload": {r.label: r.facts for r in requests}})
