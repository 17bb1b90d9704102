"""Readers of what an engine's processes observed (harness/engines/observations.py
writes them), and of what the model's own processor makes of a clip, for the
harness's tests."""
from __future__ import annotations

from harness.workloads.audio import Clip, processor


def step_adapters(events: list[dict]) -> list[dict[str, str | None]]:
    """Per step of a LoRA engine, the adapter each scheduled request ran under
    (None: the base model); steps of an engine without LoRA are left out."""
    return [e["loras"] for e in events if e.get("event") == "step" and "loras" in e]


def wrapped_lora_modules(events: list[dict]) -> list[str] | None:
    """The layers the engine's LoRA manager wrapped (the last report); None
    when the events hold no report (no LoRA, or not observed since start)."""
    reports = [e for e in events if e.get("event") == "lora_modules"]
    return list(reports[-1]["modules"]) if reports else None


def feature_frames(model: str, clip: Clip) -> int:
    """Frames the model's own feature extractor makes of this clip: what the
    engine's audio encoder must be seen to receive."""
    fe = processor(model).feature_extractor
    out = fe([clip.samples], sampling_rate=clip.sample_rate, return_tensors="np")
    mask = out.get("input_features_mask", out.get("attention_mask"))
    return int(mask.sum()) if mask is not None else int(out["input_features"].shape[-2])
