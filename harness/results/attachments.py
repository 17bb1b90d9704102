"""What the store adds to a record beside the check's own fields: the
downsampled memory timeline for every check and, for checks that did not
pass, the log tail and a full memory figure. These are extras: when one
cannot be made, the record says why and is written all the same."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

from harness.results.record import CheckRecord
from harness.results.store import RunLayout
from harness.results.timeline import TimelineError, read_timeline
from harness.verdicts import Verdict

# The browser draws these points per check; the figure uses the full file.
PAGE_POINTS = 48
LOG_TAIL_BYTES = 12_000
LOG_TAIL_LINES = 80


def attach(record: CheckRecord, layout: RunLayout) -> None:
    timeline = None
    if record.timeline_path:
        try:
            timeline = read_timeline(Path(record.timeline_path))
        except TimelineError as exc:
            record.evidence.setdefault("harness_notes", []).append(str(exc))
    if timeline is not None and timeline.t:
        record.memory_timeline = timeline.downsampled(PAGE_POINTS).to_json()
        for name, peak in timeline.peaks().items():
            record.peak_memory.setdefault(name, peak)

    if record.verdict in (Verdict.PASS.value, Verdict.SKIP.value):
        return
    if record.log_path:
        record.log_tail = log_tail(Path(record.log_path))
    if timeline is not None and timeline.t:
        from harness.report.plots import memory_figure_svg
        svg = memory_figure_svg(timeline, record.memory_budget)
        path = layout.plots_dir / f"{safe_name(record.id)}.svg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(svg, encoding="utf-8")
        record.plot_path = str(path.relative_to(layout.run_dir))


def log_tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - LOG_TAIL_BYTES))
            data = f.read()
    except OSError as exc:
        return f"[log unreadable: {exc}]"
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > LOG_TAIL_BYTES:
        lines = lines[1:]  # the first line was cut by the seek
    return "\n".join(lines[-LOG_TAIL_LINES:])


def safe_name(check_id: str) -> str:
    """A file name for a check id; a hash suffix keeps distinct ids apart."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", check_id)[-80:].strip("_.")
    return f"{stem}-{hashlib.sha1(check_id.encode()).hexdigest()[:8]}"
