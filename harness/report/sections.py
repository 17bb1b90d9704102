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
                    "complete", "incomplete_reason"}


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
    ]
    # Whatever else the engine fixtures reported, after the usual fields.
    rows += [(key, value) for key, value in run.items() if key not in SHOWN_RUN_FIELDS]
    return [(key, value) for key, value in rows if value not in (None, "", [])]


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
