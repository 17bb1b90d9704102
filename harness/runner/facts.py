"""What a check's record learns from the runs it read: each run's engine
(identity, host, failed starts, crash), the use's slice of the engine's
log, and its memory timeline, written beside the run's records."""
from __future__ import annotations

from pathlib import Path

from harness.engines.kernels import engine_host
from harness.files import slug
from harness.results.record import MEMORY_TIMELINE_POINTS, CheckRecord
from harness.runner.run import EngineUse, Run


def attach_runs(record: CheckRecord, runs: list[Run], run_dir: Path, call: tuple[float, float] | None) -> None:
    """The engine facts of every run a check read (a deferred run never sent
    has none); the first run's engine is the record's own."""
    sent = [r for r in runs if r.done]
    uses = list({id(r.use): r.use for r in sent}.values())
    if not uses:
        return
    record.model = uses[0].entry.name
    record.evidence["engines"] = {r.how: engine_label(r.use) for r in sent}
    for use in reversed(uses):
        attach_engine(record, use, run_dir, call)


def engine_label(use: EngineUse) -> str:
    if use.engine is None:
        return use.kind
    return f"{use.engine.kind}:{use.engine.identity.get('distribution')}"


def attach_engine(record: CheckRecord, use: EngineUse, run_dir: Path, call: tuple[float, float] | None) -> None:
    """One engine's facts: identity and host, failed starts, the log slice,
    the memory window (with the check's call window on its clock), a crash."""
    record.engine = engine_label(use)
    if use.engine is None:
        return
    engine = use.engine
    record.engine_version = engine.identity.get("version")
    record.host = engine_host(engine.identity)
    if engine.identity.get("architecture"):  # the model class vLLM resolved
        record.evidence["architecture"] = engine.identity["architecture"]
    if use.handle is not None and use.handle.attempts:  # its start was retried
        record.evidence.setdefault("start_attempts", use.handle.attempts)
    if engine.log_path and use.window:
        record.log_path = str(write_log_slice(run_dir / "logs", use))
    window = use.memory()
    if window is not None and window.timeline:
        record.peak_memory = window.peak
        record.memory_timeline = window.to_dict(max_points=MEMORY_TIMELINE_POINTS)["timeline"]
        # On the timeline's clock: its times count from the window's start.
        record.call_window = [round(t - window.started, 3) for t in call] if call else None
        # Full resolution, for people; named like the log slice, so a rerun's
        # engine of the same use label leaves the first attempt's in place.
        csv = run_dir / "timelines" / f"{slug(use.label)}.{Path(engine.log_path or engine.name).stem}.csv"
        csv.parent.mkdir(parents=True, exist_ok=True)
        window.write_csv(csv)
        record.timeline_path = str(csv)
        record.evidence["sampler"] = {"achieved_hz": round(window.achieved_hz, 1), "notes": window.notes,
                                      "priority": window.meta.get("priority")}
    if engine.crashed:
        if use.handle is not None:
            use.handle.record_crash(use.label)
        record.evidence.setdefault("crash", engine.crashed.to_dict() | {"log_tail": engine.crashed.log_tail[-40:]})


def write_log_slice(logs_dir: Path, use: EngineUse) -> Path:
    """The scenario's slice of its engine's log, rewritten by each of its
    records (the slice grows while the check runs). The use's label and the
    engine's log name the file, so uses of one label on different
    engines never overwrite each other's slice."""
    engine = use.engine
    path = logs_dir / f"{slug(use.label)}.{Path(engine.log_path).stem}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = engine.log_since(use.window)
    if not text:
        text = (f"[the engine wrote nothing to its log during this use, from byte "
                f"{use.window.offset} of {engine.log_path}]\n")
    path.write_text(text, encoding="utf-8")
    return path
