"""The known-issues registry: engine findings the harness has confirmed.

A failing check that matches an entry (check-id pattern, engine version in
range, host, same cause) becomes `known issue` and does not fail the run; a
passing check the entry covers (its check, engine, versions and host, the
failure's own pattern aside: a pass has none) is flagged "known issue
appears fixed".

An entry may hold only on some hosts: `host = { kernels = "_C_AVX2" }` (the
kernel library the engine loaded, or a list of them) and/or
`isa = ["amx"]` (features the engine saw, all of them). A record whose
host is unknown never matches such an entry, so a finding on one host never
hides the same check's failure on another.

An entry must be narrow enough not to hide a new bug: a python exception or
a 5xx names its exception type or status and a message pattern, and no
entry ever absorbs a start-up failure or a harness error.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from harness.verdicts import Cause, Verdict
from harness.results.record import CheckRecord
from harness.setup.cpu_features import ISA_FEATURES, KERNEL_LIBRARIES
from harness.files import load_toml
from harness.versions import version_in

REQUIRED = ("check", "engine_versions", "cause", "link", "reason")
OPTIONAL = ("engine", "exception", "status", "message", "host")
# What `host` may condition on, and the values each may take.
HOST_KEYS = {"kernels": KERNEL_LIBRARIES, "isa": tuple(ISA_FEATURES)}
# Causes too broad to register: each hides whatever else fails the same way.
# (python-exception needs `exception`, http-5xx needs `status`, both `message`.)
NARROWED_BY = {Cause.PYTHON_EXCEPTION.value: "exception", Cause.HTTP_5XX.value: "status",
               Cause.MISMATCH.value: None}
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
    # Patterns (* and ?) over the cause detail or message, one of which must
    # match: a finding whose kernel paths word the same failure differently.
    message: tuple[str, ...] | None = None
    kernels: tuple[str, ...] | None = None  # host: the kernel libraries it holds on
    isa: tuple[str, ...] | None = None      # host: the features it needs, all of them

    def matches(self, record: CheckRecord) -> bool:
        """This entry's failure: covered, and failing as the entry says."""
        if _cause_class(record.cause) in NEVER_REGISTERED:
            return False
        return self.covers(record) and self._same_failure(record)

    def covers(self, record: CheckRecord) -> bool:
        """The check, engine, version and host the entry is about."""
        if not check_pattern(self.check).fullmatch(record.id):
            return False
        if not self._on_host(record.host):
            return False
        # Drivers name the engine "<kind>:<distribution>" ("server:vllm"):
        # an entry for "vllm" covers every kind, one for "server:vllm" one kind.
        if self.engine is not None and self.engine not in (record.engine, _distribution(record.engine)):
            return False
        # An unknown or unparsable engine version cannot confirm the issue,
        # and a local build (0.32.0+patch) meets its own failures.
        return version_in(record.engine_version, str(self.engine_versions))

    def _on_host(self, host: dict | None) -> bool:
        if self.kernels is None and self.isa is None:
            return True
        if not isinstance(host, dict):  # unknown: cannot confirm a host's finding
            return False
        if self.kernels is not None and host.get("kernels") not in self.kernels:
            return False
        return all(f in (host.get("isa") or ()) for f in self.isa or ())

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
            patterns = [check_pattern(m, dotall=True) for m in self.message]
            if not any(p.fullmatch(text) for p in patterns for text in (detail, record.message or "") if text):
                return False
        return True

    def summary(self) -> dict[str, str]:
        narrowing = {k: str(v) for k in ("exception", "status") if (v := getattr(self, k)) is not None}
        if self.message is not None:
            narrowing["message"] = " | ".join(self.message)
        host = {k: list(v) for k in HOST_KEYS if (v := getattr(self, k)) is not None}
        return ({"check": self.check, "engine_versions": str(self.engine_versions),
                 "cause": self.cause, "link": self.link, "reason": self.reason} | narrowing
                | ({"host": host} if host else {}))


def load_known_issues(path: Path) -> list[KnownIssue]:
    entries = load_toml(path, KnownIssuesError, "the known-issues registry", arrays=("issue",)).get("issue", [])
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
    not_text = [key for key in raw if key not in ("status", "host", "message") and not isinstance(raw[key], str)]
    if not_text:
        raise KnownIssuesError(f"{where}: {', '.join(not_text)} must be strings")
    messages = [raw["message"]] if isinstance(raw.get("message"), str) else raw.get("message")
    if "message" in raw and not (isinstance(messages, list) and messages
                                 and all(isinstance(m, str) and m for m in messages)):
        raise KnownIssuesError(f"{where}: message must be a pattern or a list of patterns")
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
    host = _host(where, raw.get("host"))
    return KnownIssue(check=raw["check"], engine_versions=versions, cause=raw["cause"],
                      link=raw["link"], reason=raw["reason"], engine=raw.get("engine"),
                      exception=raw.get("exception"), status=raw.get("status"),
                      message=tuple(messages) if messages else None, kernels=host.get("kernels"),
                      isa=host.get("isa"))


def _host(where: str, raw) -> dict[str, tuple[str, ...]]:
    """`host = { kernels = "_C_AVX2" | [...], isa = [...] }`, each value one the harness records."""
    if raw is None:
        return {}
    example = 'host = { kernels = "_C_AVX2" } or host = { isa = ["amx"] }'
    if not isinstance(raw, dict) or not raw:
        raise KnownIssuesError(f"{where}: host must be a table naming kernels and/or isa, e.g. {example}")
    unknown = sorted(set(raw) - set(HOST_KEYS))
    if unknown:
        raise KnownIssuesError(f"{where}: host has unknown keys {unknown}; expected kernels and/or isa")
    host = {}
    for key, allowed in HOST_KEYS.items():
        if key not in raw:
            continue
        values = [raw[key]] if isinstance(raw[key], str) else raw[key]
        if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
            raise KnownIssuesError(f"{where}: host.{key} must be a name or a list of names, e.g. {example}")
        bad = [v for v in values if v not in allowed]
        if bad:
            raise KnownIssuesError(f"{where}: host.{key} {bad} unknown; expected among {', '.join(allowed)}")
        host[key] = tuple(values)
    return host


def _check_narrowed(where: str, cause_class: str, raw: dict) -> None:
    """A class-only python-exception, 5xx or mismatch entry would absorb any
    new bug of that class: a mismatch names which input (and adapter)
    diverged, in a message pattern over the failure's words."""
    if cause_class not in NARROWED_BY:
        return
    field = NARROWED_BY[cause_class]
    missing = [key for key in (field, "message") if key and key not in raw]
    if missing:
        example = {"exception": 'exception = "RuntimeError" and message = "*stride*"',
                   "status": 'status = 500 and message = "*stride*"',
                   None: 'message = "input 3-image@tower (reloaded): *"'}[field]
        raise KnownIssuesError(
            f"{where}: cause {cause_class!r} needs {' and '.join(missing)} too, so that it matches "
            f"this failure and no other (e.g. {example})")


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
    """Turn a matching failure into a known issue, flag a covered pass.
    A check that found several failures (the fuzzer's) lists the others in
    `evidence["other_failures"]` ({cause, message, evidence}): it is a known issue
    only when every one of them is, and otherwise names its first
    unregistered failure as its own (the news first)."""
    for issue in issues:
        if record.verdict == Verdict.PASS.value and issue.covers(record):
            record.known_issue_fixed = issue.summary()
            return
    if not record.is_failure:
        return
    others = record.evidence.get("other_failures") or []
    own = {k: record.evidence[k] for k in ("result",) if k in record.evidence}  # what a status is read from
    failures = [(record.cause, record.message, own)] + [(f.get("cause"), f.get("message", ""), f.get("evidence") or {})
                                                       for f in others]
    known = [_known_as(dataclasses.replace(record, cause=cause, message=message,
                                           evidence={**record.evidence, **evidence}), issues)
             for cause, message, evidence in failures]
    if all(known):
        record.verdict = Verdict.KNOWN_ISSUE.value
        record.known_issue = known[0].summary()
        return
    news = known.index(None)
    if news:
        record.cause, record.message = failures[news][:2]
        record.evidence.update(failures[news][2])
        record.evidence["other_failures"] = [{"cause": c, "message": m, "evidence": e}
                                             for i, (c, m, e) in enumerate(failures) if i != news]


def _known_as(record: CheckRecord, issues: list[KnownIssue]) -> KnownIssue | None:
    return next((issue for issue in issues if issue.matches(record) and _same_cause(record.cause, issue.cause)),
                None)


def _same_cause(actual: str | None, expected: str) -> bool:
    # A detailed cause ("python-exception: KeyError ...") matches its class;
    # a failure for another cause is news, not the known issue.
    return actual is not None and (actual == expected or actual.startswith(expected + ":"))
