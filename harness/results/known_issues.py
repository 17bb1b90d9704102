"""The known-issues registry: engine findings the harness has confirmed.

A failing check that matches an entry (check-id pattern, engine version in
range, same cause) becomes `known issue` and does not fail the run; a
passing check that matches is flagged "known issue appears fixed".

An entry must be narrow enough not to hide a new bug: a python exception or
a 5xx names its exception type or status and a message pattern, and no
entry ever absorbs a start-up failure or a harness error.
"""
from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.checks.verdicts import Cause, Verdict
from harness.results.record import CheckRecord

REQUIRED = ("check", "engine_versions", "cause", "link", "reason")
OPTIONAL = ("engine", "exception", "status", "message")
# Causes too broad to register: each hides whatever else fails the same way.
# (python-exception needs `exception`, http-5xx needs `status`, both `message`.)
NARROWED_BY = {Cause.PYTHON_EXCEPTION.value: "exception", Cause.HTTP_5XX.value: "status"}
# Never an engine finding to register: a start-up failure says nothing about
# which check it hides, and a harness error is fixed, not registered.
NEVER_REGISTERED = (Cause.STARTUP_FAILED.value, Cause.HARNESS.value)
# A finding not yet filed upstream: a file beside the registry that holds it.
FINDING_LINK = re.compile(r"docs/findings/\d{3}-[a-z0-9-]+\.md")


class KnownIssuesError(Exception):
    """The registry file is unusable; the message names the file and entry."""


@dataclasses.dataclass(frozen=True)
class KnownIssue:
    check: str          # pattern over check ids (pytest node ids); see check_pattern
    engine_versions: SpecifierSet
    cause: str
    link: str
    reason: str
    engine: str | None = None  # None: whichever engine the check ran
    exception: str | None = None  # python-exception: the exception type it raises
    status: int | None = None     # http-5xx: the HTTP status
    message: str | None = None    # pattern (* and ?) over the cause detail or message

    def matches(self, record: CheckRecord) -> bool:
        if not check_pattern(self.check).fullmatch(record.id):
            return False
        if _cause_class(record.cause) in NEVER_REGISTERED:
            return False
        if not self._same_failure(record):
            return False
        # Drivers name the engine "<kind>:<distribution>" ("server:vllm"):
        # an entry for "vllm" covers every kind, one for "server:vllm" one kind.
        if self.engine is not None and self.engine not in (record.engine, _distribution(record.engine)):
            return False
        # An unknown or unparsable engine version cannot confirm the issue.
        try:
            version = Version(record.engine_version or "")
        except InvalidVersion:
            return False
        return self.engine_versions.contains(version, prereleases=True)

    def _same_failure(self, record: CheckRecord) -> bool:
        """Exception type, status and message pattern, for the entries that give them."""
        detail = _cause_detail(record.cause)
        if self.exception is not None and _cause_class(record.cause) == Cause.PYTHON_EXCEPTION.value:
            if detail.split(":", 1)[0].strip() != self.exception:
                return False
        if self.status is not None and _cause_class(record.cause) == Cause.HTTP_5XX.value:
            if _record_status(record) != self.status:
                return False
        if self.message is not None:
            pattern = check_pattern(self.message, dotall=True)
            if not any(pattern.fullmatch(text) for text in (detail, record.message or "") if text):
                return False
        return True

    def summary(self) -> dict[str, str]:
        narrowing = {k: str(v) for k in ("exception", "status", "message")
                     if (v := getattr(self, k)) is not None}
        return {"check": self.check, "engine_versions": str(self.engine_versions),
                "cause": self.cause, "link": self.link, "reason": self.reason} | narrowing


def load_known_issues(path: Path) -> list[KnownIssue]:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise KnownIssuesError(f"{path}: cannot read the known-issues registry: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise KnownIssuesError(f"{path}: not valid TOML: {exc}") from exc
    unknown_tables = set(data) - {"issue"}
    if unknown_tables:
        raise KnownIssuesError(f"{path}: unknown top-level keys {sorted(unknown_tables)}; "
                               "entries go in [[issue]] tables")
    entries = data.get("issue", [])
    if not isinstance(entries, list):
        raise KnownIssuesError(f"{path}: 'issue' must be an array of tables ([[issue]])")
    return [_entry(path, number, raw) for number, raw in enumerate(entries, start=1)]


def _entry(path: Path, number: int, raw: dict) -> KnownIssue:
    where = f"{path}: [[issue]] #{number}"
    missing = [key for key in REQUIRED if not raw.get(key)]
    if missing:
        raise KnownIssuesError(f"{where} is missing {', '.join(missing)} "
                               f"(every entry needs {', '.join(REQUIRED)})")
    extra = set(raw) - set(REQUIRED) - set(OPTIONAL)
    if extra:
        raise KnownIssuesError(f"{where} has unknown keys {sorted(extra)}")
    not_text = [key for key in raw if key != "status" and not isinstance(raw[key], str)]
    if not_text:
        raise KnownIssuesError(f"{where}: {', '.join(not_text)} must be strings")
    if "status" in raw and not (isinstance(raw["status"], int) and 500 <= raw["status"] < 600):
        raise KnownIssuesError(f"{where}: status must be an HTTP 5xx status such as 500")
    try:
        versions = SpecifierSet(raw["engine_versions"])
    except InvalidSpecifier as exc:
        raise KnownIssuesError(f"{where}: engine_versions {raw['engine_versions']!r} is not a "
                               f"version range such as '>=0.6,<0.7.2' ({exc})") from exc
    if not str(versions):
        raise KnownIssuesError(f"{where}: engine_versions must bound the versions it covers")
    cause_class = _cause_class(raw["cause"])
    if cause_class == Cause.HARNESS.value:
        raise KnownIssuesError(f"{where}: cause 'harness' is a harness bug; fix it instead of "
                               "registering it")
    if cause_class == Cause.STARTUP_FAILED.value:
        raise KnownIssuesError(f"{where}: cause 'startup-failed' would hide every check of the "
                               "engine that did not start; register what the engine does once it runs")
    if cause_class not in {c.value for c in Cause}:
        raise KnownIssuesError(f"{where}: unknown cause {raw['cause']!r}; expected one of "
                               f"{', '.join(c.value for c in Cause if c.value not in NEVER_REGISTERED)}")
    _check_narrowed(where, cause_class, raw)
    _check_link(where, path, raw["link"])
    return KnownIssue(check=raw["check"], engine_versions=versions, cause=raw["cause"],
                      link=raw["link"], reason=raw["reason"], engine=raw.get("engine"),
                      exception=raw.get("exception"), status=raw.get("status"),
                      message=raw.get("message"))


def _check_narrowed(where: str, cause_class: str, raw: dict) -> None:
    """A class-only python-exception or 5xx entry would absorb any new bug of that class."""
    field = NARROWED_BY.get(cause_class)
    if field is None:
        return
    missing = [key for key in (field, "message") if key not in raw]
    if missing:
        example = 'exception = "RuntimeError"' if field == "exception" else "status = 500"
        raise KnownIssuesError(
            f"{where}: cause {cause_class!r} needs {' and '.join(missing)} too, so that it matches "
            f"this failure and no other (e.g. {example} and message = \"*stride*\")")


def _check_link(where: str, path: Path, link: str) -> None:
    """An upstream URL, or a finding file beside the registry that exists."""
    if link.startswith(("https://", "http://")):
        return
    if not FINDING_LINK.fullmatch(link):
        raise KnownIssuesError(f"{where}: link {link!r} is neither a URL nor a finding file "
                               "docs/findings/NNN-title.md")
    if not (Path(path).resolve().parent / link).is_file():
        raise KnownIssuesError(f"{where}: link {link!r}: no such finding file beside the registry")


def _cause_class(cause: str | None) -> str:
    return (cause or "").split(":", 1)[0].strip()


def _cause_detail(cause: str | None) -> str:
    parts = (cause or "").split(":", 1)
    return parts[1].strip() if len(parts) == 2 else ""


def _record_status(record: CheckRecord) -> int | None:
    """The HTTP status of the rejection the check failed on, where the record has one."""
    result = record.evidence.get("result")
    return result.get("rejected") if isinstance(result, dict) else None


def _distribution(engine: str | None) -> str | None:
    return engine.rsplit(":", 1)[-1] if engine else None


def check_pattern(pattern: str, *, dotall: bool = False) -> re.Pattern[str]:
    """`*` matches any run of characters, `?` one; everything else, the
    brackets of parametrized ids included, is literal (unlike fnmatch)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern), re.DOTALL if dotall else 0)


def apply_known_issues(record: CheckRecord, issues: list[KnownIssue]) -> None:
    """Turn a matching failure into a known issue, flag a matching pass."""
    for issue in issues:
        if not issue.matches(record):
            continue
        if record.is_failure and _same_cause(record.cause, issue.cause):
            record.verdict = Verdict.KNOWN_ISSUE.value
            record.known_issue = issue.summary()
            return
        if record.verdict == Verdict.PASS.value:
            record.known_issue_fixed = issue.summary()
            return


def _same_cause(actual: str | None, expected: str) -> bool:
    # A detailed cause ("python-exception: KeyError ...") matches its class;
    # a failure for another cause is news, not the known issue.
    return actual is not None and (actual == expected or actual.startswith(expected + ":"))
