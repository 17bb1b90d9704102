"""The fuzzer's strategies, held to the model's own processor (no engine):
every drawn batch is within the model's limits, and the bound of each
request's prompt tokens holds against the tokens the processor really
makes; every hostile payload is invalid, judged from its bytes alone."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import soundfile
from hypothesis import HealthCheck, given, settings
from PIL import Image

from fixtures.tiny_models import build_tiny_model
from harness.fuzz import hostile
from harness.fuzz.space import limits_for, request_tokens, workload
from harness.fuzz.strategies import batches, within_limits
from harness.models import models_for
from harness.workloads.audio import processor

FEW = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module", params=["tiny-gemma4", "tiny-gemma3n"])
def model(request):
    entry = next(e for e in models_for("cpu") if e.name == request.param)
    path = str(build_tiny_model(entry.tiny_arch, overrides=entry.build))
    proc = processor(path)
    # With LoRA on (the LoRA family's arguments): requests under adapters are drawn too.
    return entry, proc, limits_for(entry, proc, engine_args=entry.engine_args_for("test_vision_lora"))


def _decoded(part: dict):
    """(kind, what the processor takes) of one content part."""
    if part["type"] == "input_audio":
        samples, rate = soundfile.read(io.BytesIO(base64.b64decode(part["input_audio"]["data"])), dtype="float32")
        mono = samples.mean(axis=1) if samples.ndim > 1 else samples
        at_16k = np.interp(np.arange(round(len(mono) * 16000 / rate)) * rate / 16000, np.arange(len(mono)), mono)
        return "audio", at_16k.astype(np.float32)
    url = part["image_url"]["url"] if part["type"] == "image_url" else part["video_url"]["url"]
    frames = [np.asarray(Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB"))
              for b in url.split(",", 1)[1].split(",")]
    return ("image", Image.fromarray(frames[0])) if part["type"] == "image_url" else ("video", np.stack(frames))


def _prompt_tokens(proc, conversation) -> int:
    """The prompt tokens the model's own processor makes of a request."""
    media = {"audio": [], "image": [], "video": []}
    content = []
    for part in conversation[0]["content"]:
        if part["type"] == "text":
            content.append(part)
            continue
        kind, value = _decoded(part)
        media[kind].append(value)
        content.append({"type": kind})
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                    add_generation_prompt=True)
    inputs = {"text": [text]}
    if media["audio"]:
        inputs["audio"] = media["audio"]
    if media["image"]:
        inputs["images"] = media["image"]
    if media["video"]:
        inputs["videos"] = media["video"]
        inputs["do_sample_frames"] = False
    return len(proc(**inputs)["input_ids"][0])


def test_every_drawn_batch_is_within_the_models_limits(model):
    entry, proc, limits = model

    @FEW
    @given(batches(limits))
    def within(spec):
        assert within_limits(spec, limits) == []
        # An adapter changes no prompt token: the requests are built without one.
        for request, spec_request in zip(workload(spec, adapters=lambda name: None).requests, spec["requests"]):
            assert _prompt_tokens(proc, request.conversation) <= request_tokens(spec_request, limits), spec_request
    within()


def test_a_cut_that_leaves_a_valid_png_is_no_hostile_payload(model):
    """The draw the fuzzer once shrank to: an 8x8 PNG cut at 89.7 %, which
    PIL reads whole. `invalid_because` says it is valid, so the strategy's
    filter never draws it (test_every_hostile_payload_is_invalid samples
    the draws)."""
    entry, proc, limits = model
    read_whole = {"version": hostile.SPEC_VERSION, "model": limits.model, "kind": "truncated-png",
                  "width": 8, "height": 8, "keep_permille": 897}
    assert hostile.invalid_because(read_whole, limits) is None
    assert hostile.invalid_because({**read_whole, "keep_permille": 500}, limits)


@pytest.mark.parametrize("kind", hostile.KINDS)
def test_every_hostile_payload_is_invalid(model, kind):
    entry, proc, limits = model

    @FEW
    @given(hostile.payloads(kind, limits))
    def invalid(spec):
        assert hostile.invalid_because(spec, limits), spec
    invalid()
