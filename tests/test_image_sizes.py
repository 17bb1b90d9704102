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
