"""What the engine's encoder hook reads off one call (harness/compat/site/
mmharness_encoder.py): each item's length, hence whether the call was
ragged, whatever container and padding the model's kwargs use."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch

SITE = Path(__file__).resolve().parents[1] / "harness" / "compat" / "site"


@pytest.fixture
def EncoderCall(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE))
    return importlib.import_module("mmharness_encoder").EncoderCall


def _mask(lengths: list[int], window: int) -> torch.Tensor:
    return torch.tensor([[1] * n + [0] * (window - n) for n in lengths])


def test_clips_padded_to_one_window_are_ragged_in_their_feature_mask(EncoderCall):
    """Qwen2-Audio's kwargs: every clip padded to Whisper's 3000 frames, its
    valid frames in `feature_attention_mask`."""
    features = torch.zeros(3, 128, 3000)
    call = EncoderCall({"input_features": features, "feature_attention_mask": _mask([100, 350, 3000], 3000)})
    assert (call.modality, call.container, call.lengths, call.ragged) == ("audio", "tensor", [100, 350, 3000], True)
    equal = EncoderCall({"input_features": features, "feature_attention_mask": _mask([300] * 3, 3000)})
    assert (equal.lengths, equal.ragged) == ([300] * 3, False)


def test_a_list_of_padded_items_reads_their_masks_too(EncoderCall):
    call = EncoderCall({"input_features": [torch.zeros(128, 3000)] * 2,
                        "feature_attention_mask": _mask([100, 200], 3000)})
    assert (call.container, call.lengths, call.ragged) == ("list", [100, 200], True)


def test_a_list_of_items_of_their_own_lengths_is_read_by_shape(EncoderCall):
    """Gemma's ragged clips: the items themselves differ; a mask padded to
    the longest changes nothing."""
    items = [torch.zeros(99, 128), torch.zeros(349, 128)]
    call = EncoderCall({"input_features": items, "input_features_mask": _mask([99, 349], 349)})
    assert (call.container, call.lengths, call.ragged) == ("list", [99, 349], True)


def test_clips_concatenated_along_one_axis_are_read_by_their_lengths(EncoderCall):
    """Qwen2.5-Omni's kwargs: every clip's frames in one (128, total) tensor,
    each clip's frame count in `audio_feature_lengths`."""
    call = EncoderCall({"input_audio_features": torch.zeros(128, 1050),
                        "audio_feature_lengths": torch.tensor([100, 350, 600]),
                        "feature_attention_mask": _mask([100, 350, 600], 3000)})
    assert (call.modality, call.container, call.lengths, call.ragged) == \
        ("audio", "concatenated", [100, 350, 600], True)


def test_a_clip_cut_into_windows_is_one_item_of_their_summed_length(EncoderCall):
    """AudioFlamingo3's kwargs: each 30 s window padded to 3000 frames with
    its mask, `chunk_counts` windows per clip (a 45 s clip is two)."""
    call = EncoderCall({"input_features": torch.zeros(3, 128, 3000),
                        "feature_attention_mask": _mask([1200, 3000, 1500], 3000),
                        "chunk_counts": torch.tensor([1, 2])})
    assert (call.lengths, call.ragged) == ([1200, 4500], True)


def test_raw_clips_padded_to_whole_windows_are_read_by_their_samples(EncoderCall):
    """Voxtral's kwargs: each clip's samples, zero-padded by mistral_common to
    a multiple of 30 s: one window and four windows are ragged, two clips of
    one window are not."""
    window = 480000
    call = EncoderCall({"audio_arrays": [torch.zeros(window), torch.zeros(4 * window)]})
    assert (call.modality, call.container, call.lengths, call.ragged) == ("audio", "list", [window, 4 * window], True)
    assert not EncoderCall({"audio_arrays": [torch.zeros(window)] * 2}).ragged


def test_images_concatenated_as_patches_are_read_by_their_grids(EncoderCall):
    """Qwen2.5-VL's kwargs: every image's patches in one (patches, dim)
    tensor, each image's (t, h, w) grid in `image_grid_thw`: two grids of one
    patch count are still two shapes."""
    grids = torch.tensor([[1, 4, 8], [1, 8, 4], [1, 16, 16]])
    call = EncoderCall({"pixel_values": torch.zeros(320, 1176), "image_grid_thw": grids})
    assert (call.modality, call.container) == ("image", "concatenated")
    assert call.shapes == [[32, 1, 4, 8], [32, 1, 8, 4], [256, 1, 16, 16]]
    video = EncoderCall({"pixel_values_videos": torch.zeros(64, 1176), "video_grid_thw": torch.tensor([[2, 4, 8]])})
    assert (video.modality, video.shapes) == ("video", [[64, 2, 4, 8]])


def test_images_padded_to_one_patch_count_are_read_by_their_patch_positions(EncoderCall):
    """Gemma4's kwargs: every image padded to one patch count, each patch's
    (x, y) in `pixel_position_ids`, -1 where it is padding."""
    def positions(cols: int, rows: int, padded: int) -> torch.Tensor:
        grid = [[x, y] for y in range(rows) for x in range(cols)]
        return torch.tensor(grid + [[-1, -1]] * (padded - len(grid)))
    call = EncoderCall({"pixel_values": torch.zeros(2, 30, 768),
                        "pixel_position_ids": torch.stack([positions(4, 6, 30), positions(6, 4, 30)])})
    assert (call.modality, call.shapes) == ("image", [[24, 4, 6], [24, 6, 4]])


def test_images_stacked_as_tiles_are_read_by_their_tile_counts(EncoderCall):
    """Idefics3's kwargs: every image's tiles (each of one fixed size, the
    global tile among them) stacked in one (tiles, 3, side, side) tensor,
    each image's tile count in `num_patches`: a square's 10 tiles and a
    wide image's 4 are two items of their own lengths."""
    call = EncoderCall({"pixel_values": torch.zeros(14, 3, 32, 32), "pixel_attention_mask": torch.ones(14, 32, 32),
                        "num_patches": torch.tensor([10, 4])})
    assert (call.modality, call.shapes, call.ragged) == ("image", [[10, 3, 32, 32], [4, 3, 32, 32]], True)
    equal = EncoderCall({"pixel_values": torch.zeros(14, 3, 32, 32), "num_patches": torch.tensor([7, 7])})
    assert (equal.lengths, equal.ragged) == ([7, 7], False)


def test_images_as_their_own_stacks_of_tiles_are_read_by_shape(EncoderCall):
    """LLaVA-OneVision's kwargs: each image its own (tiles, 3, side, side)
    stack (its base tile plus its pinpoint's), a list where the counts
    differ, one (images, tiles, 3, side, side) tensor where they do not;
    `image_sizes` (each image's own height and width) changes nothing."""
    call = EncoderCall({"pixel_values": [torch.zeros(2, 3, 28, 28), torch.zeros(37, 3, 28, 28)],
                        "image_sizes": torch.tensor([[28, 28], [168, 168]])})
    assert (call.modality, call.container, call.lengths, call.ragged) == ("image", "list", [2, 37], True)
    equal = EncoderCall({"pixel_values": torch.zeros(2, 13, 3, 28, 28), "image_sizes": torch.tensor([[84, 112]] * 2)})
    assert (equal.container, equal.shapes, equal.ragged) == ("tensor", [[13, 3, 28, 28]] * 2, False)
