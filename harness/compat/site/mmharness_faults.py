"""Fault switches for the harness's own mutation tests.

MMHARNESS_FAULTS=name[,name...] makes the engine misbehave the way a real
bug would, so a test can show that a check catches it. Unset: no effect.
Never set outside the harness's tests.

The leaks are sized in standard deviations of the embedding they perturb:
MMHARNESS_FAULT_SCALE (default 1), or `fault_scale` in the engine's control
file, read at every encoder call (benchmarks/measure_sensitivity.py steps
one engine through many scales; 0 perturbs nothing).
"""
from __future__ import annotations

import os
import re

import mmharness_encoder
import mmharness_fault_once
import mmharness_importhook
import mmharness_memory

ENV = "MMHARNESS_FAULTS"
SCALE_ENV = "MMHARNESS_FAULT_SCALE"


def scale() -> float:
    """The leaks' size now, in standard deviations of what they perturb."""
    steered = mmharness_memory._read_control().get("fault_scale")
    return float(steered if steered is not None else os.environ.get(SCALE_ENV, "1"))


def shifted(x, seed: int):
    """x plus `scale()` standard deviations of x along a seeded direction:
    the same perturbation of the same item in every run."""
    import torch

    size = scale()
    if size == 0:
        return x
    direction = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return (x.float() + size * x.float().std() * direction).to(x.dtype)


def _padding_leak(call, outputs):
    """Items shorter than the longest in a ragged audio call get a shifted
    embedding, as if their padding leaked into them."""
    if call.modality != "audio" or not call.ragged:
        return outputs
    longest = max(call.lengths)
    return [shifted(o, n) if n < longest else o for o, n in zip(outputs, call.lengths)]


def _media_cross(call, outputs):
    """One request's media reaches another's answer: in an encoder call of
    two or more items of one shape, the last item's embedding is the first's."""
    outputs = list(outputs)
    if len(outputs) > 1 and outputs[0].shape == outputs[-1].shape:
        outputs[-1] = outputs[0].clone()
    return outputs


def _raise_ragged_audio(call) -> None:
    if call.modality == "audio" and call.ragged:
        raise RuntimeError("mmharness fault: ragged audio batch")


def _vision_chunk_leak(model) -> None:
    """Every item of a vision-tower pass but its first gets a shifted
    encoding, as if state leaked into it from the item before it."""
    encoder = getattr(getattr(model, "vision_tower", None), "encoder", None)
    if encoder is None:
        return
    real = encoder.forward

    def forward(*args, **kwargs):
        out = real(*args, **kwargs)
        out.last_hidden_state[1:] = shifted(out.last_hidden_state[1:], len(out.last_hidden_state))
        return out

    encoder.forward = forward


def _base_under_adapter(module) -> None:
    """Requests without an adapter run under the step's first adapter (the
    LoRA mapping's "no adapter" read as a slot), as finding 007 does on CPU
    once every slot is full, but in every step with an adapter in it."""
    cls = module.WorkerLoRAManager
    real = cls.set_active_adapters

    def set_active_adapters(self, requests, mapping):
        if mapping is not None:
            first = next((i for i in mapping.prompt_mapping if i > 0), 0)
            if first:
                mapping.index_mapping = tuple(i or first for i in mapping.index_mapping)
                mapping.prompt_mapping = tuple(i or first for i in mapping.prompt_mapping)
        return real(self, requests, mapping)

    cls.set_active_adapters = set_active_adapters


def _single_request_steps(module) -> None:
    cls = module.Scheduler
    real = cls.schedule

    def schedule(self, *args, **kwargs):
        # The waiting loop stops admitting once this many are active.
        limit = self.max_num_active_reqs
        self.max_num_active_reqs = min(limit, len(self.running)
                                       + self.num_waiting_for_streaming_input + 1)
        try:
            return real(self, *args, **kwargs)
        finally:
            self.max_num_active_reqs = limit

    cls.schedule = schedule


def _stop_admitting(module) -> None:
    """The scheduler admits the engine's first request, then swallows every
    later one: never queued, never scheduled, never refused, while the
    server's /health still answers (the engine that stopped admitting)."""
    cls = module.Scheduler
    real = cls.add_request

    def add_request(self, request):
        admitted = getattr(self, "_mmh_admitted", 0)
        if admitted >= 1 and request.request_id not in self.requests:
            self.__dict__.setdefault("_mmh_swallowed", []).append(request)
            return
        self._mmh_admitted = admitted + 1
        return real(self, request)

    cls.add_request = add_request


def _spin_request(module) -> None:
    """The engine's second request is never scheduled: each step sets it
    aside while the others are scheduled, and the engine core loops on it
    with nothing to run (a scheduler spinning on what it cannot place)."""
    cls = module.Scheduler
    real_add, real_schedule = cls.add_request, cls.schedule

    def add_request(self, request):
        seen = self.__dict__.setdefault("_mmh_seen", [])
        if request.request_id not in seen:
            seen.append(request.request_id)
        return real_add(self, request)

    def schedule(self, *args, **kwargs):
        seen = self.__dict__.get("_mmh_seen", [])
        victim = self.requests.get(seen[1]) if len(seen) > 1 else None
        held = victim is not None and victim in self.waiting
        if held:
            self.waiting.remove_requests([victim])
        try:
            return real_schedule(self, *args, **kwargs)
        finally:
            if held:
                self.waiting.prepend_request(victim)

    cls.add_request, cls.schedule = add_request, schedule


# What `keep-encoder-outputs` holds on to: every encoder output, for good,
# each with KEPT_PER_ITEM bytes beside it: a few of a real model's outputs
# (one image's, 256 tokens x 2048 wide in bfloat16, is 1 MiB), where a tiny
# build's is a few KiB.
_KEPT: list = []
KEPT_PER_ITEM = 4 * 2**20
# `slow-steps`: each step with work sleeps this much times the square of the
# seconds since the first. Growing linearly, the slowdown between two
# timeslices stayed under their times' ratio (2.5 for a 45 s soak's first
# and last), less the step's own time: 1.88 against the drift bound of 2 in
# one make test, a busy machine's steps being slower. Squared, it clears it.
SLOW_STEP_S_PER_S2 = 4e-4


def _keep_encoder_outputs(call, outputs):
    """Each encoder call's outputs are kept alive after their request is
    done (a reference held by mistake): host memory grows with every
    request that carries media."""
    import torch

    _KEPT.append([(o.detach().clone(), torch.ones(KEPT_PER_ITEM, dtype=torch.uint8)) for o in outputs])
    return outputs


def _slow_steps(module) -> None:
    """Every step that schedules work sleeps longer the longer the engine
    has worked (SLOW_STEP_S_PER_S2 times the square of the seconds since its
    first such step): an engine that slows down under sustained load."""
    import time

    cls = module.Scheduler
    real = cls.schedule

    def schedule(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if out.total_num_scheduled_tokens:
            first = self.__dict__.setdefault("_mmh_first_step", time.monotonic())
            time.sleep((time.monotonic() - first) ** 2 * SLOW_STEP_S_PER_S2)
        return out

    cls.schedule = schedule


def _abort_keeps_a_block(module) -> None:
    """The first request the scheduler aborts (its client went away) keeps
    one of its KV blocks: a reference taken and never dropped, so the block
    never goes back to the pool. One block, not all: on a short KV cache
    the rest still serve later requests, which a whole request's blocks
    kept would starve."""
    cls = module.Scheduler
    real = cls.finish_requests

    def finish_requests(self, request_ids, finished_status):
        if "ABORTED" in str(finished_status) and not self.__dict__.get("_mmh_kept"):
            ids = [request_ids] if isinstance(request_ids, str) else list(request_ids or ())
            for rid in ids:
                if rid not in self.requests:
                    continue
                held = [b for group in self.kv_cache_manager.get_blocks(rid).blocks for b in group if not b.is_null]
                if held:
                    held[0].ref_cnt += 1
                    self._mmh_kept = True
                    break
        return real(self, request_ids, finished_status)

    cls.finish_requests = finish_requests


def _resume_repeats_token(module) -> None:
    """A preempted request forgets its last output token: resumed, it
    computes that token again, and its client receives it twice."""
    cls = module.Scheduler
    real = cls._preempt_request

    def _preempt_request(self, request, *args, **kwargs):
        if request._output_token_ids:
            request._output_token_ids.pop()
            request._all_token_ids.pop()
        return real(self, request, *args, **kwargs)

    cls._preempt_request = _preempt_request


# The processor caches that hand an item's data on, by module: the front
# end's own (processor-only: two API servers, or no IPC), and the receiving
# ends of the LRU (engine core) and shared-memory (worker) caches.
DATA_CACHES = {"vllm.multimodal.cache.base": "MultiModalProcessorOnlyCache",
               "vllm.multimodal.cache.lru": "LruKeyReplicatedReceiverCache",
               "vllm.multimodal.cache.shm": "ShmObjectStoreReceiverCache"}


def _item_size(item) -> tuple:
    """What tells two processed items apart by size: each field's shape, and
    the sum of each integer or boolean field (a mask's valid length, the
    positions of a patch grid). Bytes alone are not enough: two clips padded
    to one length hold the same bytes, and the shorter one's features on the
    longer one's placeholders kill the engine (64 tokens for 65) instead of
    answering wrong, which is this fault's point."""
    import torch
    from vllm.multimodal.cache.base import MultiModalCache

    def geometry(data):
        if isinstance(data, torch.Tensor):
            return tuple(data.shape), None if data.is_floating_point() else int(data.sum())
        if isinstance(data, (list, tuple)):
            return tuple(geometry(d) for d in data)
        return type(data).__name__

    fields = getattr(item, "data", item)
    if not hasattr(fields, "items"):
        return (MultiModalCache.get_item_size(item),)
    return tuple(sorted((name, geometry(getattr(elem, "data", elem))) for name, elem in fields.items()))


def _processor_cache_cross(module) -> None:
    """The cache serves the first item it saw of a size for every later item
    of that size, whatever its hash: one media item's features for another's."""
    cls = getattr(module, DATA_CACHES[module.__name__])
    real = cls.get_and_update_item

    def get_and_update_item(self, mm_item, mm_hash):
        out = real(self, mm_item, mm_hash)
        item = out[0] if isinstance(out, tuple) else out
        if item is None:
            return out
        firsts = self.__dict__.setdefault("_mmh_first_of_size", {})
        first_hash, first = firsts.setdefault(_item_size(item), (mm_hash, item))
        if first_hash == mm_hash:
            return out
        return (first, *out[1:]) if isinstance(out, tuple) else first

    cls.get_and_update_item = get_and_update_item


def _reference_cache(module) -> None:
    cls = module.EngineArgs
    real = cls.create_engine_config

    def create_engine_config(self, *args, **kwargs):
        # An "isolated" engine quietly gets its caches back.
        if self.enable_prefix_caching is False:
            self.enable_prefix_caching = True
        if not self.mm_processor_cache_gb:
            self.mm_processor_cache_gb = 4
        return real(self, *args, **kwargs)

    cls.create_engine_config = create_engine_config


def _ignore_media_names(module) -> None:
    real = module._parse_chat_message_content_part

    def parse(part, *args, **kwargs):
        # The media's own hash again, so its caches can serve a renamed copy.
        if isinstance(part, dict) and "uuid" in part:
            part = {k: v for k, v in part.items() if k != "uuid"}
        return real(part, *args, **kwargs)

    module._parse_chat_message_content_part = parse


def _chunk_from_total(module):
    cls = module.Gemma4ForConditionalGeneration
    real = cls._encoder_chunk

    def _encoder_chunk(patches_per_item, free_bytes, total_bytes, position_embedding_size):
        # The call site's old bug: the card's total handed over as free.
        return real(patches_per_item, total_bytes, total_bytes, position_embedding_size)

    cls._encoder_chunk = staticmethod(_encoder_chunk)


def _both(*faults):
    def arm():
        for fault in faults:
            fault()
    return arm


def _reject_8khz(module) -> None:
    cls = module.AudioResampler
    real = cls.resample

    def resample(self, audio, *, orig_sr):
        if round(float(orig_sr)) == 8000:  # a ValueError is an input error: a 400
            raise ValueError("mmharness fault: 8 kHz audio rejected")
        return real(self, audio, orig_sr=orig_sr)

    cls.resample = resample


# The vision tower's MLP linears as vLLM names them (Gemma4: the tower's
# `<proj>.linear`; harness/lora/groups.py: vision.gate, vision.up, vision.down).
VISION_MLP = re.compile(r"vision_tower\..*\.mlp\.(?:gate|up|down)_proj(?:\..+)?")


def _lora_ignore_vision_mlp(module) -> None:
    """The LoRA model manager silently leaves the vision tower's MLP layers
    unwrapped (as a name-matching bug would): an adapter's weights for them
    load, and are never applied. Every other layer is wrapped as usual."""
    real_supported = module.is_supported_lora_module

    def is_supported_lora_module(module_name, *args, **kwargs):
        if VISION_MLP.fullmatch(module_name):
            return False
        return real_supported(module_name, *args, **kwargs)

    module.is_supported_lora_module = is_supported_lora_module
    cls = module.LoRAModelManager
    real_match = cls._match_target_modules

    def _match_target_modules(self, module_name):  # the path with --lora-target-modules
        if VISION_MLP.fullmatch(module_name):
            return False
        return real_match(self, module_name)

    cls._match_target_modules = _match_target_modules


def _encoder_fault(before=None, after=None, on_model=None):
    def arm():
        if before:
            mmharness_encoder.BEFORE.append(before)
        if after:
            mmharness_encoder.AFTER.append(after)
        if on_model:
            mmharness_encoder.ON_MODEL.append(on_model)
        mmharness_encoder.install()
    return arm


def _module_fault(module_name, patch):
    return lambda: mmharness_importhook.after_import(module_name, patch)


FAULTS = {
    "padding-leak": _encoder_fault(after=_padding_leak),
    "media-cross": _encoder_fault(after=_media_cross),
    "base-under-adapter": _module_fault("vllm.lora.worker_manager", _base_under_adapter),
    "raise-ragged-audio": _encoder_fault(before=_raise_ragged_audio),
    "single-request-steps": _module_fault("vllm.v1.core.sched.scheduler", _single_request_steps),
    "stop-admitting": _module_fault("vllm.v1.core.sched.scheduler", _stop_admitting),
    "spin-request": _module_fault("vllm.v1.core.sched.scheduler", _spin_request),
    "keep-encoder-outputs": _encoder_fault(after=_keep_encoder_outputs),
    "slow-steps": _module_fault("vllm.v1.core.sched.scheduler", _slow_steps),
    "abort-keeps-a-block": _module_fault("vllm.v1.core.sched.scheduler", _abort_keeps_a_block),
    "resume-repeats-token": _module_fault("vllm.v1.core.sched.scheduler", _resume_repeats_token),
    # Caches back on, and media names (uuids) ignored: a reference is served
    # what an earlier request of the same media left behind.
    "reference-cache": _both(_module_fault("vllm.engine.arg_utils", _reference_cache),
                             _module_fault("vllm.renderers.chat_utils", _ignore_media_names)),
    "reject-8khz": _module_fault("vllm.multimodal.audio", _reject_8khz),
    "processor-cache-cross": _both(*(_module_fault(m, _processor_cache_cross) for m in DATA_CACHES)),
    "vision-chunk-leak": _encoder_fault(on_model=_vision_chunk_leak),
    "chunk-from-total": _module_fault("vllm.model_executor.models.gemma4_mm", _chunk_from_total),
    "lora-ignore-vision-mlp": _module_fault("vllm.lora.model_manager", _lora_ignore_vision_mlp),
}


def requested() -> list[str]:
    names = [n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise ValueError(f"{ENV}: unknown fault(s) {unknown}; known: {sorted(FAULTS)}")
    return names


def install() -> None:
    once = mmharness_fault_once.names()  # those that act in one engine only
    for name in requested():
        if name in once:
            mmharness_fault_once.arm(name, FAULTS[name])
        else:
            FAULTS[name]()
