"""The cache matrix without an engine: the pairwise subset covers every
pair of settings, each cell's engine arguments say its settings, the
workload holds its pairs, and the cell premise fails with `premise` on
crafted rounds whose caches did not do what the cell says."""
import pytest

from harness.cache.cells import FULL, PAIRWISE, Cell, uncovered_pairs
from harness.cache.workload import cache_workload, largest_item_tokens
from harness.checks.caches import check_cell_caches
from harness.verdicts import Cause, CheckFailure
from harness.engines.outcomes import Completion

LABELS = ["image-a:p1", "image-b:p1", "image-a:p2"]


def test_the_pairwise_subset_covers_every_pair_in_six_cells_and_the_full_matrix_is_all_24():
    assert uncovered_pairs(PAIRWISE) == [] and len(set(PAIRWISE)) == 6
    assert len(set(FULL)) == 24 and set(PAIRWISE) <= set(FULL)
    assert uncovered_pairs(PAIRWISE[:5])  # one fewer misses a pair
    assert len({c.id for c in FULL}) == 24


def test_a_cells_engine_arguments_say_its_settings():
    assert Cell(True, "lru", "default", 1).engine_args(750) == {
        "enable_prefix_caching": True, "mm_processor_cache_type": "lru"}
    assert Cell(False, "off", "near-largest", 2).engine_args(750) == {
        "enable_prefix_caching": False, "mm_processor_cache_gb": 0, "max_num_batched_tokens": 750,
        "api_server_count": 2}
    assert Cell(True, "shm", "default", 1).id == "prefix-on-shm-mbt-default-api1"
    with pytest.raises(ValueError, match="processor must be one of"):
        Cell(True, "lfu", "default", 1)


def test_the_workload_pairs_a_prompt_with_two_media_and_a_media_item_with_two_prompts():
    work = cache_workload(frozenset({"text", "image", "audio"}), 2.0)
    assert work.labels == [*LABELS, "audio-a:p1", "audio-b:p1", "audio-a:p2"]
    a1, b1, a2 = (r.conversation[-1]["content"] for r in work.requests[:3])
    assert a1[-1] == b1[-1] and a1[0] != b1[0]  # one prompt, two images
    assert a1[0] == a2[0] and a1[-1] != a2[-1]  # one image, two prompts
    assert cache_workload(frozenset({"text", "image", "audio"}), 2.0) == work  # seeded
    with pytest.raises(ValueError, match="images or audio"):
        cache_workload(frozenset({"text"}), 2.0)

    class Proc:
        image_seq_length, audio_seq_length = 70, 750
    assert largest_item_tokens(Proc, {"image"}) == 70 and largest_item_tokens(Proc, {"image", "audio"}) == 750


def answers(*cached):
    return [Completion(text="x", token_ids=[1], cached_tokens=c) for c in cached]


def lookups(*hits, pid=7):
    return [{"event": "mm_cache", "hash": str(i), "hit": h, "pid": pid} for i, h in enumerate(hits)]


def premise(cell, rounds):
    with pytest.raises(CheckFailure) as failed:
        check_cell_caches(cell, LABELS, rounds, media_items=3)
    assert failed.value.cause == Cause.PREMISE
    return str(failed.value)


def test_the_cell_premise_holds_when_the_caches_did_what_the_cell_says():
    on = Cell(True, "lru", "default", 1)
    evidence = check_cell_caches(on, LABELS, [(answers(0, 0, 64), lookups(False, False, True)),
                                              (answers(64, 64, 64), lookups(True, True, True))], media_items=3)
    assert evidence["processor_cache"]["repeat_hits"] == 3
    off = Cell(False, "off", "default", 1)
    check_cell_caches(off, LABELS, [(answers(0, None, 0), []), (answers(0, 0, 0), [])], media_items=3)
    # Two API servers: a repeat may reach the front end that has not seen it.
    two = Cell(True, "lru", "default", 2)
    check_cell_caches(two, LABELS, [(answers(0, 0, 0), lookups(False, False, False)),
                                    (answers(64, 64, 64), lookups(False, True, False, pid=8))], media_items=3)


def test_the_cell_premise_fails_when_a_setting_did_not_take():
    assert "took cached prompt tokens" in premise(
        Cell(False, "lru", "default", 1), [(answers(0, 0, 0), lookups(False)), (answers(0, 32, 0), lookups(True))])
    assert "repeats of ['image-b:p1'] took no cached" in premise(
        Cell(True, "lru", "default", 1), [(answers(0, 0, 0), lookups(False)), (answers(64, 0, 64), lookups(True))])
    assert "processor cache is off" in premise(
        Cell(True, "off", "default", 1), [(answers(0, 0, 0), []), (answers(64, 64, 64), lookups(True))])
    assert "looked no media item up" in premise(
        Cell(True, "shm", "default", 1), [(answers(0, 0, 0), []), (answers(64, 64, 64), [])])
    assert "served 2 of the repeat's 3" in premise(
        Cell(True, "lru", "default", 1), [(answers(0, 0, 0), lookups(False, False, False)),
                                          (answers(64, 64, 64), lookups(True, False, True))])
