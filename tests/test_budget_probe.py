"""The encoder chunk budget contract: the installed engine's function passes,
a chunk function written from the module docstring's worked example passes,
and wrong ones are caught at the inputs where they break it, by hand."""
from __future__ import annotations

import sys

import pytest

from harness.checks.budget_probe import (check_encoder_chunk, free_grid, load_gemma4_encoder_chunk, probe_encoder_chunk,
                                         transient_bytes_per_item)
from harness.verdicts import Cause, CheckFailure
from harness.memory.card.profiles import PROFILES, GiB
from harness.units import MiB

# The docstring's worked example: an image of 280 soft tokens pooled 3x3
# (2520 patches) at Gemma4's default 10240 positions costs 787.5 MiB.
IMAGE_PATCHES, POSITIONS = 2520, 10240
PER_IMAGE = 825_753_600
L4 = PROFILES["l4-22g"]
# Images alone on the L4 (22 GiB): the grids the hand-worked cases below use.
IMAGES_ON_L4 = dict(profiles=[L4], patches_grid=(IMAGE_PATCHES,), position_grid=(POSITIONS,))


def at(violations, invariant: str) -> list[int]:
    """The free bytes at which `invariant` broke, ascending."""
    return sorted(v.inputs["free_bytes"] for v in violations if v.invariant == invariant)


@pytest.fixture(scope="module")
def engine_chunk():
    fn, source = load_gemma4_encoder_chunk(sys.executable)
    if fn is None:
        pytest.skip(source)
    return fn, source


def test_an_image_costs_what_the_worked_example_says():
    assert PER_IMAGE == 787.5 * MiB
    assert transient_bytes_per_item(IMAGE_PATCHES, POSITIONS) == PER_IMAGE
    assert transient_bytes_per_item(0, POSITIONS) == transient_bytes_per_item(IMAGE_PATCHES, 0) == 0


def test_installed_engine_keeps_its_budget_contract(engine_chunk):
    fn, source = engine_chunk
    assert probe_encoder_chunk(fn) == []
    check_encoder_chunk(fn, source=source)


def test_premise_the_grid_exercises_chunks_above_one(engine_chunk):
    # Without chunks > 1 the half-free invariant would never be tested.
    fn, _ = engine_chunk
    assert fn(630, L4.typical_free_after_load_bytes, L4.capacity_bytes, POSITIONS) > 1


def test_the_engine_charges_an_image_what_the_worked_example_says(engine_chunk):
    # With free and total both large, the engine returns budget // cost: half
    # of free memory worth exactly k images must give k.
    fn, _ = engine_chunk
    for k in (1, 7):
        assert fn(IMAGE_PATCHES, 2 * k * PER_IMAGE, 10 * k * PER_IMAGE, POSITIONS) == k
        assert fn(IMAGE_PATCHES, 2 * k * PER_IMAGE - 2, 10 * k * PER_IMAGE, POSITIONS) == max(1, k - 1)


def test_a_chunk_of_images_within_half_of_free_memory_keeps_the_contract():
    def half_free(patches, free, total, positions):
        return max(1, (free // 2) // PER_IMAGE)
    assert probe_encoder_chunk(half_free, **IMAGES_ON_L4) == []
    assert probe_encoder_chunk(lambda *inputs: 1) == []


def test_two_images_are_caught_below_twice_their_cost():
    # Two images hold 1575 MiB: over half of 3 GiB free, within half of 4 GiB.
    violations = probe_encoder_chunk(lambda *inputs: 2, **IMAGES_ON_L4)
    assert {3 * GiB, 4 * GiB} <= set(free_grid(L4))
    assert at(violations, "one-when-nothing") == [0]
    assert at(violations, "within-half-free") == [f for f in free_grid(L4) if f <= 3 * GiB]
    assert {v.invariant for v in violations} == {"one-when-nothing", "within-half-free"}


def test_a_chunk_sized_from_total_memory_is_caught_where_the_card_is_loaded():
    # Half of the card's 22 GiB is 14 images, whatever is free.
    def from_total(patches, free, total, positions):
        return max(1, (total // 2) // PER_IMAGE)
    violations = probe_encoder_chunk(from_total, **IMAGES_ON_L4)
    [loaded] = [v for v in violations if v.inputs["free_bytes"] == L4.typical_free_after_load_bytes]
    assert (loaded.invariant, loaded.result) == ("within-half-free", 14)
    # 14 images need 2 x 11025 MiB free: only the full card has that.
    assert at(violations, "within-half-free") == free_grid(L4)[:-2]
    with pytest.raises(CheckFailure) as info:
        check_encoder_chunk(from_total, source="from-total", **IMAGES_ON_L4)
    assert info.value.cause == Cause.OVER_BUDGET.value
    assert info.value.evidence["counts"] == {"one-when-nothing": 1, "within-half-free": len(free_grid(L4)) - 2}
    assert info.value.message.startswith("from-total breaks its budget contract")


def test_a_zero_chunk_is_caught_below_one_images_share():
    def no_floor(patches, free, total, positions):
        return (free // 2) // PER_IMAGE
    violations = probe_encoder_chunk(no_floor, **IMAGES_ON_L4)
    # One image needs 1575 MiB free: 1.5 GiB is short of it, 2 GiB is not.
    assert at(violations, "at-least-one") == [f for f in free_grid(L4) if f <= 1536 * MiB]
    assert {v.result for v in violations} == {0}


def test_a_chunk_that_shrinks_by_one_as_free_memory_grows_is_caught_where_it_shrinks():
    def shrinks(patches, free, total, positions):
        return max(1, (free // 2) // PER_IMAGE) - (free > total // 2)
    [v] = probe_encoder_chunk(shrinks, **IMAGES_ON_L4)
    # 7 images at 11 GiB free (half the card), one fewer at the next point, 12 GiB.
    assert (v.invariant, v.inputs["previous_free_bytes"], v.inputs["free_bytes"], v.result) == \
        ("monotone-in-free", 11 * GiB, 12 * GiB, 6)
    assert "down from 7" in v.detail


def test_free_grid_spans_the_card():
    grid = free_grid(L4)
    assert grid == sorted(set(grid))
    assert grid[0] == 0 and grid[-1] == 22 * GiB
    assert L4.typical_free_after_load_bytes in grid
