"""Hypothesis strategies over workload specs (harness.fuzz.space).

`batches(limits)`: batches the engine must accept and answer, each request
and the whole batch within the model's limits (items per prompt, the
longest clip, the prompt tokens of one request and of one step).
Generation leans towards the shapes the seed bugs lived in: many requests
and items, half the batches with a clip in every request, clips of
different durations, the shortest and the longest clip, durations
on and beside a token boundary of the audio encoder, images on and beside a
patch boundary and at extreme aspect ratios. Every draw shrinks towards
fewer requests, fewer items, shorter clips, smaller images and the first
choice of each list (16 kHz mono audio, the base model). On an engine
with LoRA on, each request runs under the base model or a crafted adapter.

`hostile(limits)`: one payload the engine must refuse (a 4xx with a
message) or, beyond the model's limits, refuse or cap: broken and truncated
containers, lying MIME types, clips beyond the longest at extreme sample
rates and many channels (harness.fuzz.hostile builds them).
"""
from __future__ import annotations

from hypothesis import strategies as st

from fixtures import media
from harness.fuzz.space import AUDIO_CONTENTS, SPEC_VERSION, Limits, canonical, request_tokens

# Shrinks to the first: 16 kHz, the rate the models take natively.
SAMPLE_RATES = (16000, *(r for r in media.SUPPORTED_SAMPLE_RATES if r != 16000))
PROMPTS = ("What do you hear?", "Describe what you see.", "Compare them.", "")
SHORTEST_CS = 5  # 0.05 s: the edge family's shortest clip; a 15 ms one kills the engine (finding 011)
USUAL_LONGEST_CS = 1200  # the ragged family's longest clip
# Image sizes on and beside a patch boundary (16 px patches, pooled 3x3:
# 48 px), the Gemma default, and extreme aspect ratios.
IMAGE_EDGES = ((48, 48), (47, 49), (49, 47), (896, 896), (1792, 224), (224, 1792), (32, 1024))
MAX_TOKENS = (2, 8)
# A step is kept within this share of its token budget: room for what the
# bound of a request's tokens leaves out.
STEP_SHARE = 0.9


def durations_cs(limits: Limits) -> st.SearchStrategy[int]:
    """Most clips within the seed bug's range (up to 12 s: a 30 s clip's
    encoder call takes seconds on the CPU tier); the edges besides."""
    longest = int(limits.max_audio_s * 100)
    edges = [SHORTEST_CS, longest, longest - 1]
    if limits.audio_ms_per_token:  # on and one hop (10 ms) beside a token boundary
        per = limits.audio_ms_per_token / 10
        edges += [round(per * k) + d for k in (1, 12, 25, 100) for d in (-1, 0, 1)]
    edges = sorted({e for e in edges if SHORTEST_CS <= e <= longest})
    return st.one_of(st.integers(SHORTEST_CS, min(longest, USUAL_LONGEST_CS)), st.sampled_from(edges))


def audio_items(limits: Limits) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({
        "kind": st.just("audio"), "duration_cs": durations_cs(limits),
        "sample_rate": st.sampled_from(SAMPLE_RATES), "channels": st.integers(1, 2),
        "content": st.sampled_from(AUDIO_CONTENTS)})


def image_items() -> st.SearchStrategy[dict]:
    size = st.one_of(st.tuples(st.integers(32, 768), st.integers(32, 768)), st.sampled_from(IMAGE_EDGES))
    return size.map(lambda wh: {"kind": "image", "width": wh[0], "height": wh[1]})


def video_items(limits: Limits) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({
        "kind": st.just("video"), "frames": st.integers(1, min(4, limits.max_frames)),
        "width": st.integers(32, 160), "height": st.integers(32, 160)})


def _items_of(kind: str, limits: Limits) -> st.SearchStrategy[dict]:
    return {"audio": audio_items(limits), "image": image_items(), "video": video_items(limits)}[kind]


@st.composite
def requests(draw, limits: Limits, max_tokens: int, *, with_clip: bool = False) -> dict:
    """One request: a prompt, and up to the per-prompt limit of each media
    kind the model serves (`with_clip`: at least one clip); items past the
    request's token bound are left out, clips last."""
    prompt = draw(st.one_of(st.sampled_from(PROMPTS), st.text(
        st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=1, max_size=40)))
    items = []
    for kind in limits.modalities:
        least = min(1, limits.per_prompt[kind]) if with_clip and kind == "audio" else 0
        items += draw(st.lists(_items_of(kind, limits), min_size=least, max_size=limits.per_prompt[kind]))
    request = {"prompt": prompt, "items": items}
    if limits.adapters:  # the base model first: a draw shrinks towards no adapter
        adapter = draw(st.sampled_from((None, *limits.adapters)))
        if adapter:
            request["adapter"] = adapter
    while request["items"] and request_tokens(request, limits) + max_tokens > limits.max_model_len:
        request["items"].pop()
    return request


@st.composite
def batches(draw, limits: Limits) -> dict:
    """A batch spec: requests sent in one step, and the greedy length."""
    max_tokens = draw(st.integers(*MAX_TOKENS))
    budget = int(limits.step_tokens * STEP_SHARE)
    chosen = []
    # Unique: two equal requests would give answers no comparison can tell
    # apart. One list of any size up to a full step (hypothesis draws about
    # half full on average): a list whose size is drawn apart from it cannot
    # lose a request while shrinking.
    # Half the batches take the seed bugs' shape: a clip in every request, so
    # that clips of different durations meet in one encoder call (a draw
    # shrinks towards the other half).
    ragged = "audio" in limits.modalities and draw(st.booleans())
    drawn = draw(st.lists(requests(limits, max_tokens, with_clip=ragged), min_size=1,
                          max_size=limits.max_requests, unique_by=canonical))
    for request in drawn:
        cost = request_tokens(request, limits)
        if cost > budget:
            break
        budget -= cost
        chosen.append(request)
    return {"version": SPEC_VERSION, "model": limits.model, "max_tokens": max_tokens, "requests": chosen}


def within_limits(spec: dict, limits: Limits) -> list[str]:
    """What in a spec breaks the limits it was drawn within (none: [])."""
    problems = []
    step = 0
    for i, r in enumerate(spec["requests"]):
        tokens = request_tokens(r, limits)
        step += tokens
        if tokens + spec["max_tokens"] > limits.max_model_len:
            problems.append(f"request {i}: {tokens} prompt tokens + {spec['max_tokens']} > max_model_len")
        for kind in limits.modalities:
            n = sum(1 for it in r["items"] if it["kind"] == kind)
            if n > limits.per_prompt[kind]:
                problems.append(f"request {i}: {n} {kind} items, the limit is {limits.per_prompt[kind]}")
        if r.get("adapter") and r["adapter"] not in limits.adapters:
            problems.append(f"request {i}: adapter {r['adapter']!r}; the engine serves {limits.adapters}")
        for it in r["items"]:
            if it["kind"] not in limits.modalities:
                problems.append(f"request {i}: a {it['kind']} item; the model serves {limits.modalities}")
            if it["kind"] == "audio" and it["duration_cs"] / 100 > limits.max_audio_s:
                problems.append(f"request {i}: a {it['duration_cs'] / 100} s clip, beyond {limits.max_audio_s} s")
    if len(spec["requests"]) > limits.max_requests:
        problems.append(f"{len(spec['requests'])} requests, more than {limits.max_requests}")
    if step > limits.step_tokens:
        problems.append(f"{step} prompt tokens in the step, beyond {limits.step_tokens}")
    return problems
