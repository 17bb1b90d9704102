"""One hook around every real multimodal encoder call of a vLLM v1 engine.

vLLM's model runner (`GPUModelRunner._execute_mm_encoder`, which the CPU
runner inherits) groups the scheduled items by modality and calls
`model.embed_multimodal(**kwargs)` once per group: that call is what "one
encoder call" means here. The observer and the fault switches register
functions on it; the model is wrapped on its first real encoder call, so
start-up profiling with dummy inputs is never seen.
"""
from __future__ import annotations

import contextlib

import mmharness_importhook

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
# before(call) may raise; after(call, outputs) returns the outputs to use;
# around(call) is a context manager held for the whole call.
BEFORE: list = []
AFTER: list = []
AROUND: list = []
# on_model(model) runs once, when the model is wrapped.
ON_MODEL: list = []

# (kwarg, modality), first match wins: the kwarg holding each item's input.
# Voxtral's `audio_arrays` are the raw samples, each clip zero-padded to a
# multiple of 30 s by mistral_common (no mask: the windows are what it encodes).
INPUT_KEYS = (("input_features_padded", "audio"), ("input_features", "audio"), ("input_audio_features", "audio"),
              ("audio_arrays", "audio"), ("pixel_values_videos", "video"), ("pixel_values", "image"),
              ("image_embeds", "image"))
# The mask of each item's valid frames: models that pad every clip to one
# window (Whisper's 30 s: Qwen2-Audio) are ragged in these, not in shapes.
MASK_KEYS = ("input_features_mask", "feature_attention_mask", "attention_mask")
# Each item's length outright, where the items are concatenated into one
# tensor (Qwen2.5-Omni: every clip's frames along one time axis).
LENGTH_KEYS = ("audio_feature_lengths",)
# Each image's or video's patch grid (t, h, w), where the patches of every
# item are concatenated into one tensor (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V):
# an item's shape is then [patches, t, h, w], so two grids of one patch count
# (28x56 and 56x28) still tell apart.
GRID_KEYS = {"image": "image_grid_thw", "video": "video_grid_thw"}
# Each patch's (x, y), -1 for padding, where every image is padded to one
# patch count (Gemma4): an item's shape is then [its patches, columns, rows].
POSITION_KEYS = {"image": "pixel_position_ids"}
# Each image's tile count, where every image is cut into tiles of one fixed
# size stacked along the first axis (Idefics3: its tiles plus a global one):
# an item's shape is then [its tiles, *one tile's shape].
TILE_COUNT_KEYS = {"image": "num_patches"}


def _patch_grid(positions) -> list[int]:
    """[patches, columns, rows] of one item's (x, y) patch positions, -1 padding."""
    valid = positions[positions[..., 0] >= 0]
    if len(valid) == 0:
        return [0, 0, 0]
    return [int(len(valid)), int(valid[:, 0].max()) + 1, int(valid[:, 1].max()) + 1]


class EncoderCall:
    """What one embed_multimodal call received, item by item."""

    def __init__(self, kwargs: dict):
        self.modality, self.key = next(((m, k) for k, m in INPUT_KEYS if kwargs.get(k) is not None),
                                       ("unknown", None))
        self.container, self.shapes = "none", []
        if self.key is not None:
            self._read(kwargs[self.key], kwargs)

    def _read(self, value, kwargs) -> None:
        mask = next((kwargs[k] for k in MASK_KEYS if kwargs.get(k) is not None), None)
        lengths = next((kwargs[k] for k in LENGTH_KEYS if kwargs.get(k) is not None), None)
        self.container = "list" if isinstance(value, (list, tuple)) else "tensor"
        grids = kwargs.get(GRID_KEYS.get(self.modality, ""))
        if grids is not None and not isinstance(value, (list, tuple)):
            self.container = "concatenated"
            self.shapes = [[int(t) * int(h) * int(w), int(t), int(h), int(w)] for t, h, w in grids]
            return
        positions = kwargs.get(POSITION_KEYS.get(self.modality, ""))
        if positions is not None and len(positions) == len(value):
            self.shapes = [_patch_grid(p) for p in positions]
            return
        if lengths is not None and not isinstance(value, (list, tuple)):
            self.container = "concatenated"
            self.shapes = [[int(n)] for n in lengths]
            return
        self.shapes = [list(t.shape) for t in value]
        if mask is not None and len(mask) == len(self.shapes) and len({tuple(s) for s in self.shapes}) == 1:
            # Items padded to one length: each one's real length is its mask's sum.
            self.shapes = [[int(m.sum())] + s[1:] for m, s in zip(mask, self.shapes)]
        chunks = kwargs.get("chunk_counts")
        if self.modality == "audio" and chunks is not None and sum(int(c) for c in chunks) == len(self.shapes):
            # A clip longer than the window comes as several windows: regroup them per clip.
            lengths, at = [], 0
            for count in (int(c) for c in chunks):
                lengths.append(sum(s[0] for s in self.shapes[at:at + count]))
                at += count
            self.shapes = [[n] + (self.shapes[0][1:] if self.shapes else []) for n in lengths]
        counts = kwargs.get("video_frame_counts")
        if self.modality == "video" and counts is not None:
            # Frames of all videos are stacked: regroup them per video.
            per_frame = self.shapes[0][1:] if self.shapes else []
            self.shapes = [[int(c)] + per_frame for c in counts]
        tiles = kwargs.get(TILE_COUNT_KEYS.get(self.modality, ""))
        if tiles is not None and sum(int(c) for c in tiles) == len(self.shapes):
            # Tiles of all images are stacked: regroup them per image.
            per_tile = self.shapes[0] if self.shapes else []
            self.shapes = [[int(c)] + per_tile for c in tiles]

    @property
    def lengths(self) -> list[int]:
        return [s[0] if s else 0 for s in self.shapes]

    @property
    def ragged(self) -> bool:
        return len(set(self.lengths)) > 1


def _wrap_model(model) -> None:
    real = model.embed_multimodal

    def embed_multimodal(**kwargs):
        call = EncoderCall(kwargs)
        for before in BEFORE:
            before(call)
        with contextlib.ExitStack() as stack:
            for around in AROUND:
                stack.enter_context(around(call))
            outputs = real(**kwargs)
        for after in AFTER:
            outputs = after(call, outputs)
        return outputs

    # An instance attribute: nn.Module keeps plain callables in __dict__.
    model.embed_multimodal = embed_multimodal
    model._mmharness_encoder_hook = True
    for on_model in ON_MODEL:
        on_model(model)


def _patch_runner(module) -> None:
    cls = module.GPUModelRunner
    real = cls._execute_mm_encoder

    def _execute_mm_encoder(self, *args, **kwargs):
        if not getattr(self.model, "_mmharness_encoder_hook", False):
            _wrap_model(self.model)
        return real(self, *args, **kwargs)

    cls._execute_mm_encoder = _execute_mm_encoder


_INSTALLED = False


def install() -> None:
    global _INSTALLED
    if not _INSTALLED:
        _INSTALLED = True
        mmharness_importhook.after_import(RUNNER_MODULE, _patch_runner)
