"""The end of an engine log, kept in a failing check's record so that
results.json still explains the failure after the run directory has been
copied elsewhere."""
from __future__ import annotations

from pathlib import Path

LOG_TAIL_BYTES = 12_000
LOG_TAIL_LINES = 80


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
