"""Reading an engine's encoder-memory events, and the checks on them, against
crafted event streams (the real engine's are in scenarios/test_encoder_memory.py
and its mutations in tests/test_mutations.py)."""
import json

import pytest

from harness.verdicts import CheckFailure
from harness.engines.control import EngineControl
from harness.memory.card import chunks
from harness.memory.card.emulation import card_answer, encoder_scale
from harness.memory.card.profiles import get_profile
from harness.units import MiB


def call(modality="image", free=300 * MiB, total=600 * MiB, passed_free=None, answer=2, forced=None,
         passes=(2, 2, 2), pid=1, transient=0, how="host-rss-high-water"):
    events = [{"event": "encoder", "pid": pid, "modality": modality},
              {"event": "memory_info", "pid": pid, "modality": modality, "free": free, "total": total,
               "emulated": True},
              {"event": "encoder_chunk", "pid": pid, "modality": modality, "answer": answer, "forced": forced,
               "arguments": {"patches_per_item": 630, "free_bytes": free if passed_free is None else passed_free,
                             "total_bytes": total, "position_embedding_size": 1024}}]
    return events + [{"event": "vision_chunk", "pid": pid, "modality": modality, "items": n, "patches": 630,
                      "transient_bytes": transient, "measured_by": how} for n in passes]


def test_decisions_group_each_query_with_its_chunk_and_passes():
    (d,) = chunks.decisions(call())
    assert (d.free, d.total, d.answer, d.chunk_sizes, d.items) == (300 * MiB, 600 * MiB, 2, [2, 2, 2], 6)
    assert chunks.summary(call()) == ["image: free 300.0 MiB, total 600.0 MiB (emulated) -> chunks of 2 "
                                      "for 6 items [2, 2, 2]"]
    # Two processes interleaved: each keeps its own order.
    a, b = call(pid=1), call(modality="video", pid=2, passes=(4,))
    mixed = [e for pair in zip(a, b) for e in pair] + a[len(b):]
    assert [(d.modality, d.chunk_sizes) for d in chunks.decisions(mixed)] == [("image", [2, 2, 2]),
                                                                              ("video", [4])]


def test_chunked_needs_a_batch_in_more_than_one_pass():
    chunks.check_chunked(call(), "run")
    with pytest.raises(CheckFailure, match="never chunked") as e:
        chunks.check_chunked(call(passes=(6,)), "run")
    assert e.value.cause == "premise"
    with pytest.raises(CheckFailure, match="no vision-tower pass"):
        chunks.check_chunked([{"event": "encoder", "pid": 1, "modality": "image"}], "run")


def test_forced_chunk_must_reach_the_encoder():
    chunks.check_forced_chunk(call(forced=4, passes=(4, 2)), 4, "run")
    chunks.check_forced_chunk(call(forced=1 << 30, passes=(6,)), 1 << 30, "run")
    with pytest.raises(CheckFailure, match=r"forced chunks of 3, the encoder made passes of \[2, 2, 2\]"):
        chunks.check_forced_chunk(call(forced=3), 3, "run")
    with pytest.raises(CheckFailure, match="could not be forced"):
        chunks.check_forced_chunk(call(forced=None), 3, "run")


def test_chunk_from_free_names_total_passed_as_free():
    chunks.check_chunk_from_free(call(), "run")
    with pytest.raises(CheckFailure) as e:
        chunks.check_chunk_from_free(call(passed_free=600 * MiB), "run")
    assert e.value.cause == "over-budget: chunk sized from total memory, not free"
    assert "passed the total" in str(e.value)
    with pytest.raises(CheckFailure) as e:
        chunks.check_chunk_from_free(call(passed_free=100 * MiB), "run")
    assert e.value.cause == "over-budget: chunk sized from another memory, not free"
    with pytest.raises(CheckFailure, match="no call of the chunk function"):
        chunks.check_chunk_from_free(call()[:1] + call()[3:], "run")


def test_chunks_must_shrink_with_free_memory():
    assert chunks.check_shrinks(call(), call(passes=(1,) * 6), "run") == {"image": {"usual": 2, "low_free": 1}}
    with pytest.raises(CheckFailure, match="did not shrink") as e:
        chunks.check_shrinks(call(), call(), "run")
    assert e.value.cause == "over-budget: chunk did not shrink with free memory"
    with pytest.raises(CheckFailure, match="none could shrink"):
        chunks.check_shrinks(call(passes=(1,) * 6), call(passes=(1,) * 6), "run")


def test_transient_held_to_the_stated_budget_where_the_allocator_measured_it():
    budget = chunks.stated_budget(300 * MiB, 600 * MiB)
    assert budget == 60 * MiB  # the 10% cap binds before half of free
    within = chunks.transients(call(transient=budget, how="cuda-allocator-peak"))
    chunks.check_transient_within_budget(within, "run")
    over = chunks.transients(call(transient=budget + 1, how="cuda-allocator-peak"))
    with pytest.raises(CheckFailure, match="over the 60.0 MiB budget") as e:
        chunks.check_transient_within_budget(over, "run")
    assert e.value.cause == "over-budget"
    # Host RSS is recorded, not held.
    chunks.check_transient_within_budget(chunks.transients(call(transient=budget * 9)), "run")
    with pytest.raises(CheckFailure, match="no vision-tower pass was measured"):
        chunks.check_transient_within_budget([], "run")


def test_emulated_card_is_scaled_by_encoder_cost(tmp_path):
    vision = {"default_output_length": 70, "pooling_kernel_size": 3, "position_embedding_size": 1024}
    (tmp_path / "config.json").write_text(json.dumps({"vision_config": vision}))
    scale = encoder_scale(tmp_path)
    assert scale == pytest.approx(70 * 9 * 1024 / (280 * 9 * 10240)) == pytest.approx(1 / 40)
    assert encoder_scale("org/hub-model") == 1.0
    l4 = get_profile("l4-22g")
    answer = card_answer(l4, scale)
    assert (answer.free, answer.total) == (int(l4.typical_free_after_load_bytes / 40), int(l4.capacity_bytes / 40))
    low = answer.low_free()
    assert low.total == answer.total and low.free == answer.total // 20
    assert answer.as_steering() == {"memory": (answer.free, answer.total)}
    assert "scaled x0.025" in answer.describe()


def test_control_file_holds_the_steering_only_within_the_block(tmp_path):
    control = EngineControl(tmp_path / "e.control.json")
    assert control.env() == {"MMHARNESS_CONTROL": str(tmp_path / "e.control.json")}
    with control.steering(memory=(1, 2), chunk=3):
        assert json.loads(control.path.read_text()) == {"memory": {"free": 1, "total": 2}, "chunk": 3}
    assert json.loads(control.path.read_text()) == {}
    with pytest.raises(RuntimeError, match="cannot be steered"):
        with EngineControl(None).steering(chunk=2):
            pass
    with EngineControl(None).steering():  # nothing asked: nothing needed
        pass
