"""The harness's own text files: a log's tail, JSON lines whose last line
may be half-written, the TOML files people edit (the model matrix, the
known issues, the noise profiles), a name that is safe in a file name, and
where the harness keeps what it builds."""
from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cache_dir(name: str) -> Path:
    """A folder of the harness's cache: $MMHARNESS_CACHE/name, else
    .cache/name in the checkout (not created here)."""
    base = os.environ.get("MMHARNESS_CACHE")
    return (Path(base) if base else ROOT / ".cache") / name


def log_tail(path: Path, lines: int = 200, *, start: int = 0, max_bytes: int = 512 * 1024) -> list[str]:
    """The last `lines` lines of the log written at or after byte `start`,
    reading at most its last `max_bytes` (a line that limit cuts is left
    out). No log yet: no lines."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            begin = max(start, size - max_bytes)
            f.seek(begin)
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"[log unreadable: {exc}]"]
    text = data.decode("utf-8", "replace").splitlines()
    if begin > start:
        text = text[1:]
    return text[-lines:]


def load_toml(path: Path, error: type[Exception], what: str, *, arrays: tuple[str, ...] | None = None) -> dict:
    """A TOML file people edit, or `error` naming the file: not there, not
    readable, not TOML. `arrays`: the only top-level keys it may hold, each
    an array of tables ([[name]])."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: cannot read {what}: file not found") from None
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None
    if arrays is not None:
        tables = " or ".join(f"[[{name}]]" for name in arrays)
        if unknown := sorted(set(data) - set(arrays)):
            raise error(f"{path}: unknown top-level keys {unknown}; entries go in {tables} tables")
        for name in arrays:
            if not isinstance(data.get(name, []), list):
                raise error(f"{path}: {name!r} must be an array of tables ([[{name}]])")
    return data


@dataclass
class JsonLines:
    values: list[tuple[int, Any]] = field(default_factory=list)  # (line number, value)
    bad: list[tuple[int, str]] = field(default_factory=list)     # (line number, why)
    # A last line with no newline: its writer was killed mid-write, or is
    # writing it right now.
    unfinished: bytes = b""
    unfinished_line: int = 0


def read_json_lines(data: bytes) -> JsonLines:
    lines = data.split(b"\n")
    out = JsonLines(unfinished=lines.pop().strip(), unfinished_line=len(lines) + 1)  # "" after a final newline
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            out.values.append((number, json.loads(line)))
        except ValueError as exc:
            out.bad.append((number, str(exc)))
    return out


def slug(text: str, keep: int = 120) -> str:
    """`text` as a file name: runs of other characters become "_", and the
    end is kept (a scenario's parameters are there)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[-keep:]
