"""Split a run into shards whose wall times come out even.

The unit of work is a group: a scenario module's checks of one model (and
one TP size), which share engines. A group is never split, because each
shard holding part of it would start its engines again.

Groups are packed longest first (LPT) onto the least loaded shard, costed
by their checks' last known seconds from the run history. Those seconds
include the engine starts (a module's first check of a model starts them
in its setup), so a measured group needs no start cost added. A group with
no history at all is placed by a stable hash of its key, so that a new
group does not move with every change of the others; it is costed at an
engine start plus a typical (mean) check per check, and the measured
groups are packed around it. The split depends on nothing but the groups and the
durations, not on their order: every shard computes the same plan.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import statistics
from typing import Iterable, Sequence

from harness.cache.cells import CELL_ID

# What an engine start costs on the CPU tier (30-40 s): the cost of a group
# never measured, beside its checks.
ENGINE_START_S = 35.0
# A check's cost when no check of the run was ever measured.
DEFAULT_CHECK_S = 1.0


@dataclasses.dataclass(frozen=True)
class Group:
    key: str  # module, model and engine parameters, e.g. "scenarios/test_x.py::tiny-gemma4::1"
    checks: tuple[str, ...]


@dataclasses.dataclass
class Shard:
    index: int  # 1-based, as in --shard 2/4
    groups: list[Group] = dataclasses.field(default_factory=list)
    estimated_s: float = 0.0

    @property
    def checks(self) -> list[str]:
        return [check for group in self.groups for check in group.checks]


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value: str) -> ShardSpec:
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", value)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ValueError(f"--shard: expected I/N with 1 <= I <= N (e.g. 2/4), got {value!r}")
    return ShardSpec(int(match.group(1)), int(match.group(2)))


def stable_hash(key: str) -> int:
    """The same number in every process (Python's hash() of a str is salted per process)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def group_cost(group: Group, durations: dict[str, float], typical: float) -> float:
    known = [durations[c] for c in group.checks if c in durations]
    if not known:
        return ENGINE_START_S + typical * len(group.checks)
    return sum(known) + typical * (len(group.checks) - len(known))


def plan_shards(groups: Sequence[Group], durations: dict[str, float], count: int) -> list[Shard]:
    if count < 1:
        raise ValueError(f"a plan needs at least one shard, not {count}")
    measured = [durations[c] for g in groups for c in g.checks if c in durations]
    # The mean, not the median: costs add up, and most checks take no time
    # of their own beside the few that start engines and run batches.
    typical = statistics.fmean(measured) if measured else DEFAULT_CHECK_S
    shards = [Shard(i + 1) for i in range(count)]
    new = [g for g in groups if not any(c in durations for c in g.checks)]
    known = [g for g in groups if any(c in durations for c in g.checks)]
    for group in sorted(new, key=lambda g: g.key):
        _place(shards[stable_hash(group.key) % count], group, group_cost(group, durations, typical))
    # Longest first; equal costs in the order of their keys' stable hashes.
    costed = sorted(((group_cost(g, durations, typical), g) for g in known),
                    key=lambda cg: (-cg[0], stable_hash(cg[1].key), cg[1].key))
    for cost, group in costed:
        _place(min(shards, key=lambda s: (s.estimated_s, s.index)), group, cost)
    return shards


def module_order(modules: dict[str, tuple[str, ...]], durations: dict[str, float], first: set[str]) -> list[str]:
    """The modules (name -> its checks) longest first, those in `first`
    before the others (longest first too): the order in which a run's
    workers take them, so that the long ones start early and the run does
    not end on one worker alone with a long module."""
    measured = [durations[c] for checks in modules.values() for c in checks if c in durations]
    typical = statistics.fmean(measured) if measured else DEFAULT_CHECK_S
    cost = {m: group_cost(Group(m, checks), durations, typical) for m, checks in modules.items()}
    return sorted(modules, key=lambda m: (m not in first, -cost[m], m))


def _place(shard: Shard, group: Group, cost: float) -> None:
    shard.groups.append(group)
    shard.estimated_s += cost


def plan_fingerprint(groups: Iterable[Group], durations: dict[str, float], count: int) -> str:
    """Names one plan: shards of one run carry the same fingerprint, and
    shards planned from another selection or history do not."""
    checks = sorted(c for g in groups for c in g.checks)
    used = {c: durations[c] for c in checks if c in durations}
    text = json.dumps([count, checks, sorted(used.items())], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def group_of_check_id(check_id: str, model_names: Iterable[str]) -> str:
    """A recorded check id's group key, for ids with no pytest item at hand
    (recorded durations, id lists): its module, the longest model name among
    its parameters, its TP size (`tpN`) and its cache-matrix cell. The
    shard plugin groups items by their parameters instead."""
    module, _, rest = check_id.partition("::")
    params = rest[rest.index("[") + 1:-1] if rest.endswith("]") and "[" in rest else ""
    padded = f"-{params}-"
    model = max((m for m in model_names if f"-{m}-" in padded), key=len, default=None)
    tp = re.search(r"(?:^|-)tp(\d+)(?:-|$)", params)
    cell = CELL_ID.search(params)
    return "::".join([module, str(model), *([tp.group(1)] if tp else []), *([cell.group(0)] if cell else [])])


def groups_of_check_ids(check_ids: Iterable[str], model_names: Iterable[str]) -> list[Group]:
    names = list(model_names)
    by_key: dict[str, list[str]] = {}
    for check in check_ids:
        by_key.setdefault(group_of_check_id(check, names), []).append(check)
    return [Group(key, tuple(checks)) for key, checks in by_key.items()]
