"""Benchmark of the shard plan on recorded durations: the longest shard's
seconds for n = 2, 4 and 8, longest-first from the history (--shard)
against hash sharding.

    .venv/bin/python benchmarks/bench_shards.py [--durations benchmarks/data/durations_cpu.json]

Durations are each check's setup + call + teardown in a real CPU-tier run
(benchmarks/data/durations_cpu.json, taken from its results.json); a
module x model group's engine starts are inside its checks' seconds.

- longest-first: harness.schedule.shards.plan_shards with those durations.
- group hash: the same with no history (every group new, placed by its
  stable hash): what a first sharded run gets.
- check hash: pytest-shard's way, each check by a hash of its id. A group
  split over k shards starts its engines k times: every shard holding part
  of a group but not its longest check (where the measured start is) pays
  one more engine start (ENGINE_START_S).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.models import models_for
from harness.schedule.shards import ENGINE_START_S, Group, groups_of_check_ids, plan_shards, stable_hash

DATA = Path(__file__).resolve().parent / "data" / "durations_cpu.json"


def check_hash_loads(groups: list[Group], seconds: dict[str, float], count: int) -> list[float]:
    loads = [0.0] * count
    for group in groups:
        starter = max(group.checks, key=lambda c: seconds[c])
        holders = set()
        for check in group.checks:
            shard = stable_hash(check) % count
            loads[shard] += seconds[check]
            holders.add(shard)
        for shard in holders - {stable_hash(starter) % count}:
            loads[shard] += ENGINE_START_S
    return loads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--durations", type=Path, default=DATA)
    args = parser.parse_args()
    data = json.loads(args.durations.read_text())
    seconds: dict[str, float] = data["seconds"]
    groups = groups_of_check_ids(seconds, [e.name for e in models_for(data["tier"])])
    total = sum(seconds.values())
    print(f"{len(seconds)} checks in {len(groups)} module x model groups, {total:.0f} s in all "
          f"(largest group {max(sum(seconds[c] for c in g.checks) for g in groups):.0f} s); {data['source']}")
    print(f"{'n':>3} {'ideal':>7} {'longest-first':>14} {'group hash':>11} {'check hash':>11}   longest shard, s")
    for count in (2, 4, 8):
        lpt = max(sum(seconds[c] for c in s.checks) for s in plan_shards(groups, seconds, count))
        fresh = max(sum(seconds[c] for c in s.checks) for s in plan_shards(groups, {}, count))
        hashed = max(check_hash_loads(groups, seconds, count))
        print(f"{count:>3} {total / count:>7.0f} {lpt:>14.0f} {fresh:>11.0f} {hashed:>11.0f}")


if __name__ == "__main__":
    main()
