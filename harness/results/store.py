"""Append-only record files, one per xdist worker, and the run directory
layout around them.

Each record is one line written with a single write() and fsynced before
the check's next step, so a run killed at any moment keeps every record
that was written before the kill. Reading never rewrites these files: a
line that cannot be read is reported with its file and line number, and
the lines around it are kept.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Iterable

from harness.files import read_json_lines
from harness.results.record import CheckRecord, json_safe


@dataclasses.dataclass(frozen=True)
class RunLayout:
    """Where everything of one run lives."""
    run_dir: Path

    @property
    def records_dir(self) -> Path:
        return self.run_dir / "records"

    @property
    def results_json(self) -> Path:
        return self.run_dir / "results.json"

    @property
    def report_html(self) -> Path:
        return self.run_dir / "report.html"

    @property
    def engines_dir(self) -> Path:
        """Each engine's log, and the run's engine starts (harness.results.starts)."""
        return self.run_dir / "engines"

    @property
    def engine_starts(self) -> Path:
        return self.engines_dir / "starts.jsonl"

    def records_file(self, worker: str) -> Path:
        return self.records_dir / f"{worker}.jsonl"

    def metadata_file(self, worker: str) -> Path:
        return self.records_dir / f"{worker}.meta.json"


class RecordWriter:
    """Appends records for one worker. The file is opened on the first
    record, so a session that checks nothing leaves no run directory."""

    def __init__(self, layout: RunLayout, worker: str):
        self.path = layout.records_file(worker)
        self._fd: int | None = None

    def append(self, record: CheckRecord) -> None:
        line = json.dumps(json_safe(record.to_json()), ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        if self._fd is None:
            self._open()
            # A restarted worker (xdist replaces a crashed one under the same
            # name) may find its predecessor's last line cut short: end it,
            # so the new record stands on a line of its own.
            if _ends_mid_line(self.path):
                data = b"\n" + data
        written = os.write(self._fd, data)
        while written < len(data):  # a short write is legal; finish the line
            written += os.write(self._fd, data[written:])
        os.fsync(self._fd)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _ends_mid_line(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) == 0:
            return False
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


@dataclasses.dataclass
class ReadResult:
    records: list[CheckRecord]
    # "path:line: what is wrong", one per line that was not read.
    problems: list[str]


def read_records(paths: Iterable[Path]) -> ReadResult:
    records: list[CheckRecord] = []
    problems: list[str] = []
    for path in paths:
        lines = read_json_lines(path.read_bytes())
        for number, value in lines.values:
            try:
                records.append(CheckRecord.from_json(value))
            except (ValueError, TypeError) as exc:
                lines.bad.append((number, str(exc)))
        problems += [f"{path}:{number}: unreadable record ({why})" for number, why in sorted(lines.bad)]
        if lines.unfinished:
            problems.append(f"{path}:{lines.unfinished_line}: unfinished record ({len(lines.unfinished)} bytes, no newline): "
                            f"its writer was killed mid-write")
    return ReadResult(records, problems)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(json_safe(data), ensure_ascii=False, indent=1))


def write_results_atomic(path: Path, results: dict[str, Any]) -> None:
    """results.json with one record a line: quick to write (the C encoder
    does no indenting) and still readable with grep and diff."""
    head = {key: value for key, value in results.items() if key != "records"}
    lines = [json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=json_safe)
             for record in results["records"]]
    text = json.dumps(head, ensure_ascii=False, default=json_safe)[:-1]
    text += ', "records": [\n' + ",\n".join(lines) + "\n]}\n"
    write_text_atomic(path, text)


def write_text_atomic(path: Path, text: str) -> None:
    """Write so a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
