"""The project's Markdown pages, and the shell commands they show: what the
docs tests hold to the code."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# How a command starts: the make targets and the venv's interpreter, an
# executable of the checkout, or pytest, each maybe after VAR=value words.
_ENV = r"(?:[A-Z][A-Z0-9_]*=\S*\s+)*"
_PROGRAM = r"(?:make\s+\w|\.venv/bin/python\s+-m\s|tests/gpu/check\b|pytest\s)"
COMMAND_START = re.compile(rf"^(?:\$\s+)?{_ENV}{_PROGRAM}")
# A fenced code block: its language and its body.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def pages() -> list[Path]:
    """README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _joined(lines: list[str]) -> list[str]:
    """Lines with their backslash continuations joined."""
    out, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out + ([pending] if pending else [])


def _uncommented(line: str) -> str:
    """A line without its trailing shell comment (two spaces, then #)."""
    return re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()


def commands_in(text: str) -> list[str]:
    """The commands a page shows: each line of a shell block (or a `$ `
    line of a transcript), each indented code block's line, and each inline
    code span, that starts as a command does."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang in ("", "sh", "bash", "console", "shell"):
            found += [_uncommented(line) for line in _joined(body.splitlines())]
    outside = FENCE.sub("", text)
    for block in re.findall(r"(?:^|\n)\n((?:    \S.*\n)+)", outside):
        found += [_uncommented(line) for line in _joined(block.splitlines())]
    # An inline span may wrap onto the next line, never across a paragraph.
    found += [" ".join(span.split()) for span in re.findall(r"`((?:[^`\n]|\n(?!\n))+)`", outside)]
    return [c.removeprefix("$").strip() for c in found if COMMAND_START.match(c.strip())]


def doc_commands() -> list[tuple[str, str]]:
    """(page, command) for every command of every page, each once."""
    seen = {}
    for page in pages():
        for command in commands_in(page.read_text(encoding="utf-8")):
            seen.setdefault(command, page.relative_to(ROOT).as_posix())
    return [(page, command) for command, page in seen.items()]
