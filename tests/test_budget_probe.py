"""The encoder chunk budget contract: the installed engine's function passes,
and deliberately wrong functions are caught, each by the invariant it breaks."""
from __future__ import annotations

import sys

import pytest

from harness.checks.budget_probe import (check_encoder_chunk, free_grid, load_gemma4_encoder_chunk, probe_encoder_chunk,
                                         transient_bytes_per_item)
from harness.checks.verdicts import Cause, CheckFailure
from harness.memory.card.profiles import PROFILES, GiB


@pytest.fixture(scope="module")
def engine_chunk():
    fn, source = load_gemma4_encoder_chunk(sys.executable)
    if fn is None:
        pytest.skip(source)
    return fn, source


def test_installed_engine_keeps_its_budget_contract(engine_chunk):
    fn, source = engine_chunk
    assert probe_encoder_chunk(fn) == []
    check_encoder_chunk(fn, source=source)


def test_premise_the_grid_exercises_chunks_above_one(engine_chunk):
    # Without chunks > 1 the half-free invariant would never be tested.
    fn, _ = engine_chunk
    l4 = PROFILES["l4-22g"]
    assert fn(630, l4.typical_free_after_load_bytes, l4.capacity_bytes, 10240) > 1


def test_per_item_transient_matches_the_engines_arithmetic(engine_chunk):
    # With free and total both large, the engine returns budget // cost; a
    # budget of exactly k transients must give k.
    fn, _ = engine_chunk
    per_item = transient_bytes_per_item(2520, 10240)
    assert per_item == 2520 * 2 * 10240 * 8 * 2 == 825_753_600
    k = 7
    assert fn(2520, 2 * k * per_item, 10 * k * per_item, 10240) == k


def sized_from_total(patches, free, total, positions):
    cost = transient_bytes_per_item(patches, positions)
    return max(1, (total // 10) // cost) if cost else 1


def test_a_chunk_sized_from_total_memory_is_caught():
    violations = probe_encoder_chunk(sized_from_total)
    assert violations
    assert {v.invariant for v in violations} >= {"within-half-free", "one-when-nothing"}
    v = next(v for v in violations if v.invariant == "within-half-free")
    assert set(v.inputs) >= {"card", "patches_per_item", "free_bytes", "total_bytes",
                             "position_embedding_size"}
    assert v.result > 1 and 2 * v.result * transient_bytes_per_item(
        v.inputs["patches_per_item"], v.inputs["position_embedding_size"]) > v.inputs["free_bytes"]
    with pytest.raises(CheckFailure) as info:
        check_encoder_chunk(sized_from_total, source="wrong")
    assert info.value.cause == Cause.OVER_BUDGET.value
    assert info.value.evidence["counts"]["within-half-free"] > 0


def test_a_zero_chunk_is_caught():
    def no_floor(patches, free, total, positions):
        cost = transient_bytes_per_item(patches, positions)
        return (free // 2) // cost if cost else 0
    invariants = {v.invariant for v in probe_encoder_chunk(no_floor)}
    assert "at-least-one" in invariants


def test_a_chunk_that_shrinks_as_free_memory_grows_is_caught():
    def shrinks(patches, free, total, positions):
        return 1 if free > total // 2 or not patches or not positions else max(
            1, (free // 2) // transient_bytes_per_item(patches, positions))
    violations = probe_encoder_chunk(shrinks)
    assert {v.invariant for v in violations} == {"monotone-in-free"}
    assert all(v.inputs["previous_free_bytes"] < v.inputs["free_bytes"] for v in violations)


def test_free_grid_spans_the_card():
    l4 = PROFILES["l4-22g"]
    grid = free_grid(l4)
    assert grid == sorted(set(grid))
    assert grid[0] == 0 and grid[-1] == 22 * GiB
    assert l4.typical_free_after_load_bytes in grid
