"""Join the results of a run's shards (`--shard I/N`) into one run.

Only shards of one plan join: the same count and plan fingerprint (the
same selection split from the same history), each index once, no check
twice: but each shard has engines of its own, numbered alike, so an
engine's teardown check is renamed for its shard, and every shard collects
every module, so a module's collection error is kept once. A shard that is missing, or that did not go to its end, leaves the
joined run incomplete, saying which.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from harness.results.metadata import merge_reported
from harness.results.record import CheckRecord
from harness.results.run import ResultsError, RunResults

# Facts of one shard's own process, kept per shard under `shards`, not merged.
PER_SHARD = ("run_id", "command", "started", "finished", "pytest_exit_status", "complete",
             "incomplete_reason", "shard", "checks_collected")


# The family of the records the engines plugin writes for each engine's teardown.
ENGINE_TEARDOWN = "engine_teardown"


class ShardJoinError(ResultsError):
    """Shard results that cannot be joined, with the reason in plain words."""


def join_shards(parts: list[RunResults]) -> RunResults:
    if not parts:
        raise ShardJoinError("no shard results to join")
    shards = [_shard_of(part) for part in parts]
    first, first_shard = parts[0], shards[0]
    for part, shard in zip(parts[1:], shards[1:]):
        if (shard["count"], shard["plan"]) != (first_shard["count"], first_shard["plan"]):
            raise ShardJoinError(
                f"{part.path} and {first.path} are shards of different runs: plan {shard['plan']} of "
                f"{shard['count']} shards against plan {first_shard['plan']} of {first_shard['count']} "
                "(another selection, tier or history)")
    by_index: dict[int, RunResults] = {}
    for part, shard in zip(parts, shards):
        if shard["index"] in by_index:
            raise ShardJoinError(f"shard {shard['index']}/{shard['count']} given twice: "
                                 f"{by_index[shard['index']].path} and {part.path}")
        by_index[shard["index"]] = part
    count = first_shard["count"]
    ordered = [by_index[i] for i in sorted(by_index)]
    records: dict[str, CheckRecord] = {}
    owner: dict[str, RunResults] = {}
    for part in ordered:
        for record in part.records:
            record = _shard_local(record, _shard_of(part)["index"], count)
            if record.id in owner:
                if _is_collection_error(record):
                    continue  # every shard collects every module: one record says it
                raise ShardJoinError(f"{record.id} is in two shards: {owner[record.id].path} and {part.path}")
            owner[record.id], records[record.id] = part, record

    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in by_index]
    cut_short = [f"{s['index']}/{count} ({p.incompleteness})" for p, s in zip(parts, shards) if not p.complete]
    reasons = ([f"shards missing: {', '.join(missing)}"] if missing else []) + \
              ([f"shards incomplete: {'; '.join(cut_short)}"] if cut_short else [])
    run: dict[str, Any] = {
        "run_id": f"merged-{first_shard['plan']}",
        **merge_reported([{k: v for k, v in p.run.items() if k not in PER_SHARD} for p in ordered]),
        "started": min((p.run["started"] for p in ordered if p.run.get("started")), default=None),
        "finished": max((p.run["finished"] for p in ordered if p.run.get("finished")), default=None),
        "shards": [{"index": _shard_of(p)["index"], "count": count, "run_id": p.run.get("run_id"),
                    "started": p.run.get("started"), "finished": p.run.get("finished"),
                    "complete": p.complete, "counts": p.counts, "path": str(p.path)} for p in ordered],
        "complete": not reasons,
        **({"incomplete_reason": "; ".join(reasons)} if reasons else {}),
    }
    collected = [p.run.get("checks_collected") for p in ordered]
    if not missing and all(isinstance(c, int) for c in collected):
        run["checks_collected"] = sum(collected)
    problems = [f"shard {_shard_of(p)['index']}/{count}: {problem}" for p in ordered for problem in p.problems]
    return RunResults(run=run, records=sorted(records.values(), key=lambda r: r.id), problems=problems)


def _shard_local(record: CheckRecord, index: int, count: int) -> CheckRecord:
    """An engine's teardown check is numbered within its own run (the
    pool's 01, 02, ...): each shard has an engine_teardown::01-..., so its
    id says which shard's it is."""
    if record.family != ENGINE_TEARDOWN:
        return record
    head, _, rest = record.id.partition("::")
    return dataclasses.replace(record, id=f"{head}::shard{index}of{count}-{rest}")


def _is_collection_error(record: CheckRecord) -> bool:
    return "::" not in record.id  # a module that failed to collect is recorded by its path


def _shard_of(part: RunResults) -> dict[str, Any]:
    shard = part.run.get("shard")
    if not (isinstance(shard, dict) and isinstance(shard.get("index"), int)
            and isinstance(shard.get("count"), int) and isinstance(shard.get("plan"), str)):
        raise ShardJoinError(f"{part.path}: not a shard's results (its run was not started with --shard I/N)")
    return shard
