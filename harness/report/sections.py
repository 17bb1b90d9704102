"""What the page's sections show, as data; templates/sections.html.j2 draws
them (autoescaped, so nothing here escapes)."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from harness.checks.verdicts import Verdict
from harness.report.format import engine_label
from harness.results.record import CheckRecord
from harness.units import GiB

# Run fields the metadata table shows under its own labels (or not at all).
SHOWN_RUN_FIELDS = {"engine", "engine_version", "torch", "device", "tier", "started", "finished",
                    "command", "harness_git_sha", "harness_git_dirty", "python", "harness_torch",
                    "gpus", "cpu_model", "platform", "run_id", "pytest_exit_status",
                    "complete", "incomplete_reason", "shard", "shards"}


def metadata_rows(run: dict[str, Any]) -> list[tuple[str, Any]]:
    rows = [
        ("engine", engine_label(run.get("engine"), run.get("engine_version"))),
        ("engine torch", run.get("torch")),
        ("device", run.get("device")),
        ("tier", run.get("tier")),
        ("started", run.get("started")),
        ("finished", run.get("finished") or "did not finish (records merged after the run)"),
        ("command", run.get("command")),
        ("harness git sha", (run.get("harness_git_sha") or "") + (" (uncommitted changes)" if run.get("harness_git_dirty") else "")),
        ("python", run.get("python")),
        ("harness torch", run.get("harness_torch")),
        ("GPUs", _gpus(run.get("gpus") or [])),
        ("CPU", run.get("cpu_model")),
        ("platform", run.get("platform")),
        ("shard", _shard(run.get("shard"))),
        ("shards", _shards(run.get("shards") or [])),
    ]
    # Whatever else the engine fixtures reported, after the usual fields.
    rows += [(key, value) for key, value in run.items() if key not in SHOWN_RUN_FIELDS]
    return [(key, value) for key, value in rows if value not in (None, "", [])]


def _shard(shard: Any) -> str | None:
    if not isinstance(shard, dict):
        return None if shard is None else str(shard)
    return (f"{shard.get('index')}/{shard.get('count')}: {shard.get('checks')} checks, planned at "
            f"{shard.get('estimated_s')} s from {shard.get('history')} (plan {shard.get('plan')})")


def _shards(shards: list[Any]) -> str:
    """A merged run's shards: each one's run, and whether it went to its end."""
    return "; ".join(f"{s.get('index')}/{s.get('count')} {s.get('run_id')} ({sum((s.get('counts') or {}).values())} "
                     f"checks{'' if s.get('complete') else ', incomplete'})" if isinstance(s, dict) else str(s)
                     for s in shards)


def _gpus(gpus: list[dict[str, Any]]) -> str:
    return "; ".join(f"{g['name']} · {g['memory_bytes'] / GiB:.0f} GiB · driver {g['driver']}"
                     if "name" in g else str(g.get("error", g)) for g in gpus)


def cause_groups(records: list[CheckRecord]) -> list[tuple[str, list[CheckRecord]]]:
    """Failures and known issues by the cause's head; causes with new
    failures first, known issues last."""
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for record in records:
        if record.is_failure or record.verdict == Verdict.KNOWN_ISSUE.value:
            groups[(record.cause or "unknown").split(":", 1)[0].strip()].append(record)
    return sorted(groups.items(), key=lambda g: (-sum(r.is_failure for r in g[1]), g[0]))
