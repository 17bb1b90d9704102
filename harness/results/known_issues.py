"""The known-issues registry: engine findings the harness has confirmed.

A failing check that matches an entry (check-id pattern, engine version in
range, same cause) becomes `known issue` and does not fail the run; a
passing check that matches is flagged "known issue appears fixed".
"""
from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.results.record import CheckRecord
from harness.verdicts import Cause, Verdict

REQUIRED = ("check", "engine_versions", "cause", "link", "reason")
OPTIONAL = ("engine",)


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

    def matches(self, record: CheckRecord) -> bool:
        if not check_pattern(self.check).fullmatch(record.id):
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

    def summary(self) -> dict[str, str]:
        return {"check": self.check, "engine_versions": str(self.engine_versions),
                "cause": self.cause, "link": self.link, "reason": self.reason}


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
    not_text = [key for key in raw if not isinstance(raw[key], str)]
    if not_text:
        raise KnownIssuesError(f"{where}: {', '.join(not_text)} must be strings")
    try:
        versions = SpecifierSet(raw["engine_versions"])
    except InvalidSpecifier as exc:
        raise KnownIssuesError(f"{where}: engine_versions {raw['engine_versions']!r} is not a "
                               f"version range such as '>=0.6,<0.7.2' ({exc})") from exc
    if not str(versions):
        raise KnownIssuesError(f"{where}: engine_versions must bound the versions it covers")
    cause_class = raw["cause"].split(":", 1)[0].strip()
    if cause_class == Cause.HARNESS.value:
        raise KnownIssuesError(f"{where}: cause 'harness' is a harness bug; fix it instead of "
                               "registering it")
    if cause_class not in {c.value for c in Cause}:
        raise KnownIssuesError(f"{where}: unknown cause {raw['cause']!r}; expected one of "
                               f"{', '.join(c.value for c in Cause if c is not Cause.HARNESS)}")
    return KnownIssue(check=raw["check"], engine_versions=versions, cause=raw["cause"],
                      link=raw["link"], reason=raw["reason"], engine=raw.get("engine"))


def _distribution(engine: str | None) -> str | None:
    return engine.rsplit(":", 1)[-1] if engine else None


def check_pattern(pattern: str) -> re.Pattern[str]:
    """`*` matches any run of characters, `?` one; everything else, the
    brackets of parametrized ids included, is literal (unlike fnmatch)."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern))


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
