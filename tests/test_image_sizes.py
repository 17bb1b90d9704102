"""The ragged-images family's sizes come from each model's own processor
(harness/workloads/images.py): its pixel limits, the grids it makes, the
placeholders it puts in a prompt. On the real tiny processors."""
from __future__ import annotations

import pytest

from fixtures.tiny_models import build_tiny_model
from harness.workloads import images


@pytest.fixture(scope="module")
def processors() -> dict:
    return {arch: images.processor(str(build_tiny_model(arch))) for arch in ("qwen2-5-vl", "gemma4", "gemma3n")}


def test_qwen_vl_sizes_span_its_pixel_limits_and_each_makes_its_own_grid(processors):
    proc = processors["qwen2-5-vl"]
    limits = images.image_limits(proc)
    assert limits == images.ImageLimits(unit=28, min_pixels=56 * 56, max_pixels=64 * 28 * 28)
    sizes = images.ragged_sizes(limits)
    assert all(limits.min_pixels <= w * h <= limits.max_pixels for w, h in sizes), sizes
    grids = images.grids(proc, sizes)
    assert len(set(grids)) == len(sizes), grids
    # One token per 2x2 merged patches: the grid's patches over 4.
    assert [images.image_tokens(proc, [s]) for s in sizes] == [t * h * w // 4 for t, h, w in grids]
    assert images.image_tokens(proc, sizes[:2]) == sum(images.image_tokens(proc, [s]) for s in sizes[:2])


def test_gemma4_wide_and_tall_images_are_other_grids_than_squares(processors):
    proc = processors["gemma4"]
    limits = images.image_limits(proc)
    assert limits.unit == 16 * 3 and limits.max_pixels == 70 * 48 * 48  # max_soft_tokens of 3x3 pooled patches
    grids = images.grids(proc, images.ragged_sizes(limits))
    assert len(set(grids)) >= 3, grids


def test_a_processor_that_resizes_every_image_to_one_size_makes_one_grid(processors):
    """Gemma3n's SigLIP processor: no batch of it is ragged, which the family
    says instead of calling its batch ragged."""
    proc = processors["gemma3n"]
    limits = images.image_limits(proc)
    assert limits.min_pixels == limits.max_pixels
    assert len(set(images.grids(proc, images.ragged_sizes(limits)))) == 1


def test_pan_and_scan_crops_wide_and_tall_images_by_their_aspect_ratio():
    """Gemma3's processor with pan-and-scan: every image one 64 px square,
    and a wide or tall one also 2 to 4 crops (none under 32 px a side), each
    a square too: the squares' 1 tile and the wide and tall images' 1 + 4 are
    two grids, so its batch of them is ragged. Its placeholder is the
    tokenizer's <image_soft_token> (4 a tile), not the processor's own
    image_token, <start_of_image>, the prompt's marker that it expands."""
    proc = images.processor(str(build_tiny_model("gemma3")))
    limits = images.image_limits(proc)
    assert limits == images.ImageLimits(unit=32, min_pixels=64 * 64, max_pixels=4 * 64 * 64)
    sizes = images.ragged_sizes(limits)
    assert sizes == [(64, 64), (128, 128), (160, 32), (32, 160)]
    assert images.grids(proc, sizes) == [(1, 3, 64, 64)] * 2 + [(5, 3, 64, 64)] * 2
    assert images.image_token_id(proc) == proc.tokenizer.convert_tokens_to_ids("<image_soft_token>")
    assert images.image_token_id(proc) != proc.tokenizer.convert_tokens_to_ids(proc.image_token)
    assert [images.image_tokens(proc, [s]) for s in sizes] == [4, 4, 20, 20]
    assert images.grids(proc, [images.equal_size(limits)]) == [(3, 3, 64, 64)]


def test_a_tiling_processor_reads_its_limits_as_sides_and_tiles_by_aspect_ratio():
    """Idefics3's processor: `size.longest_edge` is the side every image's
    longest is resized to, `max_image_size.longest_edge` a tile's side (not
    pixel counts, as Qwen-VL's). Its tile count (plus one global tile)
    follows an image's aspect ratio: the squares' 3x3 and the wide and tall
    images' 3x1 are two grids, so its batch of them is ragged."""
    proc = images.processor(str(build_tiny_model("idefics3")))
    limits = images.image_limits(proc)
    assert limits == images.ImageLimits(unit=32, min_pixels=32 * 32, max_pixels=96 * 96)
    sizes = images.ragged_sizes(limits)
    assert sizes == [(32, 32), (96, 96), (96, 32), (32, 96)]
    assert images.grids(proc, sizes) == [(10, 3, 32, 32)] * 2 + [(4, 3, 32, 32)] * 2
    # image_seq_len 4 tokens a tile.
    assert [images.image_tokens(proc, [s]) for s in sizes] == [40, 40, 16, 16]
    assert images.grids(proc, [images.equal_size(limits)]) == [(7, 3, 32, 32)]


def test_a_tiling_processor_that_does_not_split_resizes_every_image_to_one_tile():
    class Unsplit:
        max_image_size = {"longest_edge": 364}
        size = {"longest_edge": 4 * 364}
        do_image_splitting = False
    limits = images.image_limits(Unsplit())
    assert limits.min_pixels == limits.max_pixels == 364 * 364


def test_an_anyres_processor_reads_its_limits_off_its_pinpoints_and_tiles_by_size_and_aspect():
    """LLaVA-OneVision's processor: `size` is one 28 px tile (every image's
    base tile), `image_grid_pinpoints` the (height, width) grids of tiles an
    image may be cut into: from one tile's pixels to the largest pinpoint's
    (6x6 tiles). The smallest image is 1 tile, the square 6x6, the wide and
    tall ones 2x6 and 6x2, each plus the base tile: three grids, a ragged batch."""
    proc = images.processor(str(build_tiny_model("llava-onevision")))
    limits = images.image_limits(proc)
    assert limits == images.ImageLimits(unit=28, min_pixels=28 * 28, max_pixels=168 * 168)
    sizes = images.ragged_sizes(limits)
    assert sizes == [(28, 28), (168, 168), (196, 56), (56, 196)]
    assert images.grids(proc, sizes) == [(2, 3, 28, 28), (37, 3, 28, 28)] + [(13, 3, 28, 28)] * 2
    # 2x2 features a tile: the base tile's 4, the unpadded pinpoint tiles'
    # (downsampled past 9 tiles' worth, anyres_max_9), a newline per row.
    assert [images.image_tokens(proc, [s]) for s in sizes] == [10, 46, 37, 44]
    assert images.image_tokens(proc, sizes[:2]) == 10 + 46


def test_an_anyres_processor_tiles_by_its_crop_size():
    """LLaVA-NeXT's: `size` is the shortest edge, `crop_size` the tile."""
    class Next:
        size = {"shortest_edge": 336}
        crop_size = {"height": 336, "width": 336}
        image_grid_pinpoints = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
    assert images.image_limits(Next()) == images.ImageLimits(336, 336 * 336, 672 * 672)


def test_a_processor_with_no_pixel_limit_is_a_clear_error():
    class Bare:
        patch_size = 14
    with pytest.raises(ValueError, match="states no pixel limit"):
        images.image_limits(Bare())


def test_the_workload_has_one_request_per_size_and_one_of_several():
    work = images.image_workload("ragged", [(56, 56), (224, 224)], several=2)
    assert work.labels == ["image0:56x56", "image1:224x224", "several:56x56+224x224"]
    assert [len([p for p in r.conversation[0]["content"] if p["type"] == "image_url"]) for r in work.requests] \
        == [1, 1, 2]
    assert images.image_workload("equal", [(56, 56)] * 2).labels == ["image0:56x56", "image1:56x56"]
