"""Whether a check's engine never started, read from its record, and why.

"Did not start" is read from the evidence the runner keeps for an engine
that never became ready (`engine_started: false`), not from the cause: such
an engine may carry `oom` or `illegal-instruction` as well as
`startup-failed`. The start-up error is the exception that ended the
engine's last traceback, and the package whose file raised it (the
traceback's last frame), so a reader knows which library refused the
engine.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from packaging.utils import canonicalize_name

from harness.verdicts import Cause
from harness.engines.causes import package_of, root_traceback
from harness.results.record import CheckRecord

# The evidence key the runner sets for an engine that never became ready.
STARTED_KEY = "engine_started"


@dataclass(frozen=True)
class StartupError:
    line: str                   # "AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute"
    package: str | None = None  # the top-level package that raised it ("transformers"), where installed
    file: str | None = None     # the file of the traceback's last frame
    version: str | None = None  # the package's version in the engine's venv, where known

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def said(self) -> str:
        where = " ".join(filter(None, (self.package, self.version)))
        return self.line + (f" (raised in {where})" if where else "")


def never_started(record: CheckRecord) -> bool:
    evidence = record.evidence or {}
    if STARTED_KEY in evidence:
        return evidence[STARTED_KEY] is False
    return record.cause == Cause.STARTUP_FAILED.value  # a record kept before the key was


def startup_error(record: CheckRecord, installed: dict[str, str] | None = None) -> StartupError:
    """The engine's own last words: its root exception and where it was
    raised (with that package's version from `installed`, the venv's
    distributions by canonical name); else the record's message's last line."""
    crash = (record.evidence or {}).get("crash") or {}
    found = root_traceback(crash.get("log_tail") or [])
    if found:
        kind, message, file = found
        package = package_of(file)
        version = (installed or {}).get(canonicalize_name(package)) if package else None
        return StartupError(f"{kind}: {message}" if message else kind, package, file, version)
    lines = [line for line in (crash.get("detail") or record.message or "").splitlines() if line.strip()]
    return StartupError(lines[-1].strip() if lines else f"the engine did not start ({record.cause})")
