"""The shard plan (harness/schedule/shards.py): coverage over the real scenario ids,
longest-first evenness, groups kept whole, determinism, the hash fallback."""
from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness.models import models_for
from harness.schedule.shards import (ENGINE_START_S, Group, group_cost, group_of_check_id, groups_of_check_ids,
                            parse_shard, module_order, plan_fingerprint, plan_shards, stable_hash)

ROOT = Path(__file__).resolve().parents[1]


def _real_groups(tier: str) -> list[Group]:
    ids = (ROOT / "tests" / "data" / f"scenario_check_ids_{tier}.txt").read_text().split()
    return groups_of_check_ids(ids, [e.name for e in models_for(tier)])


def _some_durations(groups: list[Group]) -> dict[str, float]:
    """Every other group measured, at made-up but fixed seconds; the rest new."""
    return {c: float(stable_hash(c) % 40) for g in groups[::2] for c in g.checks}


@pytest.mark.parametrize("tier", ["cpu", "gpu"])
def test_shards_of_the_real_suite_are_disjoint_cover_it_and_keep_groups(tier):
    groups = _real_groups(tier)
    ids = [c for g in groups for c in g.checks]
    # The premise: the ids do fall into many groups, each of one model.
    assert len(groups) >= 8 and all(g.key.split("::")[1] in c for g in groups for c in g.checks
                                    if g.key.split("::")[1] != "None")
    durations = _some_durations(groups)
    for count in (1, 2, 3, 4, 8):
        shards = plan_shards(groups, durations, count)
        held = [c for s in shards for c in s.checks]
        assert sorted(held) == sorted(ids) and len(held) == len(set(held)), count
        shard_of = {c: s.index for s in shards for c in s.checks}
        for group in groups:
            assert len({shard_of[c] for c in group.checks}) == 1, (count, group.key)


def test_vision_lora_ids_group_by_model_and_tp():
    keys = {g.key for g in _real_groups("cpu") if "vision_lora" in g.key}
    assert {"scenarios/test_vision_lora.py::tiny-gemma4::1", "scenarios/test_vision_lora.py::tiny-gemma4::2",
            "scenarios/test_vision_lora.py::tiny-gemma3n::1"} <= keys


def test_an_id_takes_the_longest_model_name_it_holds():
    names = ["tiny-gemma4", "tiny-gemma4-awq", "tiny-gemma4-conformer"]
    assert group_of_check_id("m.py::t[chunk1-tiny-gemma4-awq]", names) == "m.py::tiny-gemma4-awq"
    assert group_of_check_id("m.py::t[tiny-gemma4-conformer-0.05s]", names) == "m.py::tiny-gemma4-conformer"
    assert group_of_check_id("m.py::t[tp2-tiny-gemma4-all-four]", names) == "m.py::tiny-gemma4::2"
    assert group_of_check_id("m.py::t", names) == "m.py::None"


def _groups(costs: dict[str, float]) -> tuple[list[Group], dict[str, float]]:
    groups = [Group(key, (f"{key}::a", f"{key}::b")) for key in costs]
    return groups, {c: costs[g.key] / 2 for g in groups for c in g.checks}


def _loads(shards) -> list[float]:
    return [round(s.estimated_s, 6) for s in shards]


def test_longest_first_evens_out_shard_times():
    groups, durations = _groups({"g10": 10, "g6": 6, "g4": 4})
    assert [sorted(g.key for g in s.groups) for s in plan_shards(groups, durations, 2)] == [["g10"], ["g4", "g6"]]
    rng = random.Random(7)
    groups, durations = _groups({f"g{i}": rng.uniform(1, 60) for i in range(40)})
    total = sum(durations.values())
    for count in (2, 4, 8):
        loads = _loads(plan_shards(groups, durations, count))
        assert sum(loads) == pytest.approx(total)
        # LPT's bound: within 4/3 of the best possible, and shards differ by
        # less than one group.
        assert max(loads) <= 4 / 3 * max(total / count, max(durations.values()) * 2)
        assert max(loads) - min(loads) <= 60, loads


def test_modules_go_longest_first_and_those_alone_first_of_all():
    modules = {"m/a.py": ("m/a.py::x",), "m/b.py": ("m/b.py::x", "m/b.py::y"), "m/soak.py": ("m/soak.py::x",),
               "m/aborts.py": ("m/aborts.py::x", "m/aborts.py::y")}
    durations = {"m/a.py::x": 300.0, "m/b.py::x": 100.0, "m/b.py::y": 1.0, "m/soak.py::x": 900.0}
    # measured: a 300 s before b 101 s; aborts unmeasured (an engine start and two typical checks)
    assert module_order(modules, durations, {"m/soak.py", "m/aborts.py"}) == [
        "m/soak.py", "m/aborts.py", "m/a.py", "m/b.py"]
    # no history: an engine start and a default check per check, so the most checks first
    assert module_order(modules, {}, set()) == ["m/aborts.py", "m/b.py", "m/a.py", "m/soak.py"]


def test_a_group_is_never_split_even_when_splitting_would_even_out():
    groups = [Group("big", tuple(f"big::{i}" for i in range(10))), Group("small", ("small::0",))]
    durations = {**{f"big::{i}": 10.0 for i in range(10)}, "small::0": 1.0}
    shards = plan_shards(groups, durations, 2)
    assert sorted(s.checks for s in shards) == sorted([[f"big::{i}" for i in range(10)], ["small::0"]])
    assert sorted(_loads(shards)) == [1.0, 100.0]


def test_the_plan_does_not_depend_on_input_order():
    groups = _real_groups("cpu")
    durations = _some_durations(groups)
    shuffled = groups[:]
    random.Random(3).shuffle(shuffled)
    plan = [sorted(s.checks) for s in plan_shards(groups, durations, 4)]
    assert [sorted(s.checks) for s in plan_shards(shuffled, durations, 4)] == plan
    assert plan_fingerprint(shuffled, durations, 4) == plan_fingerprint(groups, durations, 4)
    assert plan_fingerprint(groups, {**durations, groups[0].checks[0]: 99.0}, 4) != plan_fingerprint(groups, durations, 4)


def test_the_plan_is_the_same_in_every_process():
    """Python salts str hashes per process; the plan must not move with it."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from test_shards import _real_groups, _some_durations;"
              "from harness.schedule.shards import plan_shards; g = _real_groups('gpu');"
              "print([len(s.checks) for s in plan_shards(g, {}, 4)], [len(s.checks) for s in plan_shards(g, _some_durations(g), 4)])")
    outs = {subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed}, check=True).stdout
            for seed in ("1", "2")}
    assert len(outs) == 1, outs


def test_a_new_group_falls_back_to_its_stable_hash():
    assert stable_hash("scenarios/x.py::m") == int(hashlib.sha256(b"scenarios/x.py::m").hexdigest()[:16], 16)
    new = Group("scenarios/new.py::tiny", ("scenarios/new.py::t[tiny]",))
    for others in ({"g1": 30, "g2": 20}, {"g1": 5, "g2": 50, "g3": 7, "g4": 80}):
        groups, durations = _groups(others)
        for count in (2, 3, 5):
            [home] = [s.index for s in plan_shards(groups + [new], durations, count) if new in s.groups]
            assert home == stable_hash(new.key) % count + 1
    # Costed as an engine start and a typical check, and packed around.
    assert group_cost(new, {}, typical=2.0) == ENGINE_START_S + 2.0


def test_a_partly_measured_group_counts_its_new_checks_as_typical():
    group = Group("g", ("g::old", "g::new"))
    assert group_cost(group, {"g::old": 40.0}, typical=1.5) == 41.5


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "a/b", "1/0", ""])
def test_a_bad_shard_value_is_refused(value):
    with pytest.raises(ValueError, match="expected I/N"):
        parse_shard(value)
