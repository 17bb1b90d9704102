"""The in-engine observer: with MMHARNESS_OBSERVE=<path>, every engine process
appends what it really did to that file, one JSON line per event, in the
format of harness/engines/observations.py:
  step     - one scheduled model step: requests, tokens per request, total,
             and (LoRA engines) the adapter each request ran under;
  finished - the requests the scheduler finished since its last step;
  encoder  - one multimodal encoder call: modality, items, each item's shape,
             and (tower LoRA engines) the adapter of each item in the tower;
  lora_modules - the layers the LoRA model manager wrapped, once per worker;
  mm_cache - one lookup of a media item in the multimodal processor cache
             (the front end's side): its hash, and whether it was a hit;
  held     - what the scheduler's requests hold, each time it changes: KV
             blocks free of the pool's, encoder-cache slots free of its
             size, requests running and waiting;
  preempted - a running request the scheduler preempted (to be resumed);
  aborted  - the requests the scheduler aborted (a client went away), and
             the KV blocks each held then;
  memory_info, encoder_chunk, vision_chunk - encoder memory (mmharness_memory).
Several processes write the same file: each line is one O_APPEND write.
"""
from __future__ import annotations

import json
import os
import time

import mmharness_encoder
import mmharness_importhook

ENV = "MMHARNESS_OBSERVE"

_fd: int | None = None
_fd_pid: int | None = None


def emit(event: str, **fields) -> None:
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():  # a forked child opens its own
        _fd = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fd_pid = os.getpid()
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
    os.write(_fd, (line + "\n").encode())


# The tower LoRA mapping of the encoder pass in progress: the adapter of each
# item, in the order the runner sends items through embed_multimodal calls.
# None when the pass set none (no LoRA, or no tower LoRA).
_tower: dict | None = None


def _record_encoder_call(call: mmharness_encoder.EncoderCall) -> None:
    fields = {}
    if _tower is not None:
        n = len(call.shapes)
        names = _tower["names"][_tower["cursor"]:_tower["cursor"] + n]
        _tower["cursor"] += n
        fields["tower_lora"] = {"active": any(names), "adapters": names}
    emit("encoder", modality=call.modality, items=len(call.shapes), shapes=call.shapes,
         container=call.container, **fields)


def _lora_name(lora_request) -> str | None:
    return getattr(lora_request, "lora_name", None) if lora_request else None


def _patch_runner(module) -> None:
    cls = module.GPUModelRunner
    real = cls.execute_model

    def execute_model(self, scheduler_output, *args, **kwargs):
        finished = getattr(scheduler_output, "finished_req_ids", None)
        if finished:  # also in an empty step: how the last requests' end is told
            emit("finished", requests=sorted(str(r) for r in finished))
        total = int(scheduler_output.total_num_scheduled_tokens)
        if total:  # an empty step schedules nothing: not a step of the workload
            tokens = {str(k): int(v) for k, v in scheduler_output.num_scheduled_tokens.items()}
            fields = {}
            if getattr(self, "lora_config", None):
                # New requests carry their adapter in the scheduler output; the
                # others in the runner's cached state (not yet updated here).
                new = {r.req_id: r.lora_request for r in scheduler_output.scheduled_new_reqs}
                fields["loras"] = {rid: _lora_name(new[rid] if rid in new else
                                                   getattr(self.requests.get(rid), "lora_request", None))
                                   for rid in tokens}
            emit("step", requests=len(tokens), tokens=tokens, total_tokens=total, **fields)
        return real(self, scheduler_output, *args, **kwargs)

    cls.execute_model = execute_model

    real_encoder = cls._execute_mm_encoder

    def _execute_mm_encoder(self, *args, **kwargs):
        global _tower
        _tower = None  # set again by this pass's tower mapping, if it has one
        try:
            return real_encoder(self, *args, **kwargs)
        finally:
            _tower = None

    cls._execute_mm_encoder = _execute_mm_encoder


def _patch_lora_worker(module) -> None:
    cls = module.WorkerLoRAManager
    real = cls.set_active_adapters

    def set_active_adapters(self, requests, mapping):
        global _tower
        if mapping is not None and getattr(mapping.type, "name", None) == "TOWER":
            names = {r.lora_int_id: r.lora_name for r in requests if r}
            _tower = {"names": [names.get(i, f"id:{i}") if i > 0 else None
                                for i in mapping.prompt_mapping], "cursor": 0}
        return real(self, requests, mapping)

    cls.set_active_adapters = set_active_adapters


def _patch_lora_manager(module) -> None:
    cls = module.LoRAModelManager
    real = cls._create_lora_modules

    def _create_lora_modules(self):
        result = real(self)
        mm = getattr(self, "mm_mapping", None)
        prefixes = {"language": list(getattr(mm, "language_model", []) or []),
                    "tower": list(getattr(mm, "tower_model", []) or []),
                    "connector": list(getattr(mm, "connector", []) or [])} if mm else {}
        emit("lora_modules", modules=sorted(self.modules),
             tower_connector=bool(getattr(self, "supports_tower_connector_lora", False)),
             prefixes=prefixes)
        return result

    cls._create_lora_modules = _create_lora_modules


# The processor caches of the front end (P0), by module: each looks an item
# up in get_and_update_item, whose hit is what a cache check must observe.
MM_CACHES = {"vllm.multimodal.cache.base": ("MultiModalProcessorOnlyCache",),
             "vllm.multimodal.cache.lru": ("LruKeyReplicatedSenderCache",),
             "vllm.multimodal.cache.shm": ("ShmObjectStoreSenderCache",)}


def _patch_mm_caches(module) -> None:
    for name in MM_CACHES[module.__name__]:
        cls = getattr(module, name, None)
        if cls is None:  # another release: nothing of that name to observe
            continue
        real = cls.get_and_update_item

        def get_and_update_item(self, mm_item, mm_hash, _real=real):
            emit("mm_cache", hash=str(mm_hash), hit=bool(self.is_cached_item(mm_hash)))
            return _real(self, mm_item, mm_hash)

        cls.get_and_update_item = get_and_update_item


def _held(scheduler) -> None:
    """The `held` event, when what the requests hold changed since the last."""
    pool = scheduler.kv_cache_manager.block_pool
    encoder = scheduler.encoder_cache_manager
    state = {"free_blocks": int(pool.get_num_free_blocks()), "blocks": int(pool.num_gpu_blocks) - 1,  # less the null block
             "encoder_free": getattr(encoder, "num_freeable_slots", None),
             "encoder_slots": getattr(encoder, "cache_size", None),
             "running": len(scheduler.running), "waiting": len(scheduler.waiting)}
    if scheduler.__dict__.get("_mmh_held") != state:
        scheduler.__dict__["_mmh_held"] = state
        emit("held", **state)


def _blocks_held(scheduler, request_ids) -> dict:
    """The KV blocks each request holds (none while it waits or after a preemption)."""
    ids = [request_ids] if isinstance(request_ids, str) else list(request_ids or ())
    return {rid: sum(1 for group in scheduler.kv_cache_manager.get_blocks(rid).blocks for b in group if not b.is_null)
            for rid in ids if rid in scheduler.requests}


def _patch_scheduler(module) -> None:
    cls = module.Scheduler
    for name in ("schedule", "update_from_output"):  # what is held once a step is planned, and once it is done
        real = getattr(cls, name)

        def after(self, *args, _real=real, **kwargs):
            out = _real(self, *args, **kwargs)
            _held(self)
            return out
        setattr(cls, name, after)

    real_preempt = cls._preempt_request

    def _preempt_request(self, request, *args, **kwargs):
        emit("preempted", request=str(request.request_id), computed=int(request.num_computed_tokens),
             output_tokens=int(request.num_output_tokens))
        return real_preempt(self, request, *args, **kwargs)
    cls._preempt_request = _preempt_request

    real_finish = cls.finish_requests

    def finish_requests(self, request_ids, finished_status):
        aborting = "ABORTED" in str(finished_status)
        held = _blocks_held(self, request_ids) if aborting else {}
        out = real_finish(self, request_ids, finished_status)
        if out and aborting:
            emit("aborted", requests=sorted(str(r.request_id) for r in out),
                 held_blocks={str(r.request_id): held.get(r.request_id, 0) for r in out})
        _held(self)
        return out
    cls.finish_requests = finish_requests


def install() -> None:
    """Arm the observer if MMHARNESS_OBSERVE is set; otherwise do nothing."""
    if not os.environ.get(ENV):
        return
    mmharness_importhook.after_import(mmharness_encoder.RUNNER_MODULE, _patch_runner)
    mmharness_importhook.after_import("vllm.v1.core.sched.scheduler", _patch_scheduler)
    mmharness_importhook.after_import("vllm.lora.worker_manager", _patch_lora_worker)
    mmharness_importhook.after_import("vllm.lora.model_manager", _patch_lora_manager)
    for module in MM_CACHES:
        mmharness_importhook.after_import(module, _patch_mm_caches)
    mmharness_encoder.BEFORE.insert(0, _record_encoder_call)  # seen even if a fault raises
    mmharness_encoder.install()
    import mmharness_memory

    mmharness_memory.install()
