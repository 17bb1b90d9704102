"""Classify why an engine died, from its exit status and its log."""
from __future__ import annotations

import re
import signal as _signal

from harness.verdicts import AnyCause, Cause, DetailedCause

OOM_PATTERNS = (
    "OutOfMemoryError", "CUDA out of memory", "CUDA error: out of memory",
    "Cannot allocate memory", "std::bad_alloc", "MemoryError",
    "No available memory for the cache blocks",
)
ILLEGAL_PATTERNS = ("Illegal instruction", "SIGILL")
# Exceptions that only say "the engine is gone"; the root cause is elsewhere.
WRAPPER_EXCEPTIONS = ("EngineDeadError", "EngineGenerateError", "KeyboardInterrupt",
                      "SystemExit", "BrokenPipeError", "ConnectionResetError", "EOFError")
# vLLM re-raises a failure in another process under its own words ("Engine
# core initialization failed. See root cause above."): such a message points
# at the root exception instead of being it.
WRAPPER_MESSAGE = re.compile(r"see (?:the )?(?:stack trace|root cause)|for (?:the )?root cause", re.I)
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?::\s?(.*))?$")
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line \d+')
# vLLM prefixes lines with "(EngineCore pid=123) ERROR 04-18 14:25:37 [core.py:1108] ";
# torch.distributed prefixes a rank's uncaught traceback with "[rank0]: " (an
# engine in one process, whose worker is rank 0 of the process itself).
_PREFIX = re.compile(r"^(?:\[rank\d+\]:\s?)?(?:\(\w+(?: pid=\d+)?\)\s)?"
                     r"(?:(?:ERROR|WARNING|INFO|DEBUG)\s+\S+\s+\S+\s+\[[^\]]*\]\s?)?")


def signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip())


def root_exception(lines: list[str]) -> tuple[str, str] | None:
    """The last exception ('Type', 'message') that ended a traceback and is
    not a wrapper: neither a wrapper type nor a message pointing elsewhere."""
    found = root_traceback(lines)
    return found[:2] if found else None


def root_traceback(lines: list[str]) -> tuple[str, str, str | None] | None:
    """root_exception's ('Type', 'message'), and the file of the traceback's
    last frame: the code that raised it (None where the traceback named none)."""
    found = None
    in_tb, last_file = False, None
    for raw in lines:
        line = _strip(raw)
        if line.startswith("Traceback (most recent call last)"):
            in_tb, last_file = True, None
            continue
        frame = _FRAME_LINE.match(line)
        if in_tb and frame:
            last_file = frame.group(1)
            continue
        if in_tb and not line.startswith((" ", "\t")) and line:
            m = _EXC_LINE.match(line)
            if m and m.group(1) not in WRAPPER_EXCEPTIONS and not WRAPPER_MESSAGE.search(m.group(2) or ""):
                found = (m.group(1), (m.group(2) or "").strip(), last_file)
            if m:
                in_tb = False
    return found


def package_of(path: str | None) -> str | None:
    """The top-level package an installed file belongs to
    (.../site-packages/transformers/x.py: transformers); None outside an
    installed package."""
    parts = (path or "").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            return parts[i + 1].split(".")[0] or None
    return None


def classify(returncode: int | None, log_lines: list[str], *, started: bool = True) -> AnyCause:
    """OOM, ILLEGAL_INSTRUCTION, STARTUP_FAILED (never became ready), the root
    exception in the log as a PYTHON_EXCEPTION with its type and message, or
    ENGINE_DEAD."""
    text = "\n".join(log_lines)
    sig = signal_name(returncode)
    if any(p in text for p in OOM_PATTERNS):
        return Cause.OOM
    if sig == "SIGILL" or any(p in text for p in ILLEGAL_PATTERNS):
        return Cause.ILLEGAL_INSTRUCTION
    if not started:
        return Cause.STARTUP_FAILED
    exc = root_exception(log_lines)
    if exc:
        return DetailedCause(Cause.PYTHON_EXCEPTION, f"{exc[0]}: {exc[1]}")
    return Cause.ENGINE_DEAD


def engine_message(log_lines: list[str]) -> str:
    """The engine's own words for what went wrong: its root exception, if any."""
    exc = root_exception(log_lines)
    return f"{exc[0]}: {exc[1]}" if exc else ""
