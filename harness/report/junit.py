"""JUnit XML of a run's records, for CI systems that read it.

One <testcase> per record: a failed check carries <failure>, a harness
error (or a record with no verdict) <error>, a skipped or unsupported one
<skipped>. A known issue is not a failure: its case passes, and says so in
its properties (verdict, cause, link) and in <system-out>; so does a flaky
check (its run status is 7, not 1: harness/results/status.py). Every value
is engine output or harness text: ElementTree escapes markup, and
characters XML 1.0 cannot hold at all (NUL, terminal escapes) are written
as \\xNN so the file still parses.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

from harness.verdicts import Verdict
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.store import write_text_atomic

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_FAILURE = {Verdict.FAIL.value: "failure", Verdict.ERROR.value: "error",
            Verdict.SKIP.value: "skipped", Verdict.UNSUPPORTED.value: "skipped"}
# The failure text: the message, the first divergence, then the log's end.
_LOG_TAIL_CHARS = 4000


def xml_text(value: object) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", "" if value is None else str(value))


def testsuite(results: RunResults, name: str) -> ET.Element:
    records = results.records
    kinds = [_FAILURE.get(r.verdict or Verdict.ERROR.value) for r in records]
    suite = ET.Element("testsuite", {
        "name": xml_text(name), "tests": str(len(records)),
        "failures": str(kinds.count("failure")), "errors": str(kinds.count("error")),
        "skipped": str(kinds.count("skipped")), "time": f"{sum(r.seconds for r in records):.3f}",
        **({"timestamp": xml_text(results.run["started"])} if results.run.get("started") else {})})
    if not results.complete:
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", {"name": "incomplete", "value": xml_text(results.incompleteness)})
    for record, kind in zip(records, kinds):
        suite.append(_testcase(record, kind))
    return suite


def _testcase(record: CheckRecord, kind: str | None) -> ET.Element:
    file, _, name = record.id.partition("::")
    case = ET.Element("testcase", {
        "classname": xml_text(file.removesuffix(".py").replace("/", ".")), "name": xml_text(name or file),
        "file": xml_text(file), "time": f"{record.seconds:.3f}"})
    verdict = record.verdict or Verdict.ERROR.value
    if verdict != Verdict.PASS.value:
        props = ET.SubElement(case, "properties")
        for key, value in (("verdict", verdict), ("cause", record.cause),
                           ("known_issue", (record.known_issue or {}).get("link"))):
            if value:
                ET.SubElement(props, "property", {"name": key, "value": xml_text(value)})
    summary = f"{record.cause}: {record.message}" if record.cause else record.message
    if kind is not None:
        element = ET.SubElement(case, kind, {"message": xml_text(summary or verdict)})
        if record.cause:
            element.set("type", xml_text(record.cause))
        if kind != "skipped":
            element.text = xml_text(_failure_text(record))
    elif verdict == Verdict.FLAKY.value:  # a passing case that says what its first attempt failed with
        out = ET.SubElement(case, "system-out")
        out.text = xml_text(f"flaky, not a failure of this run: the first attempt failed ({summary}), "
                            f"a rerun on fresh engines passed")
    elif verdict == Verdict.KNOWN_ISSUE.value:
        issue = record.known_issue or {}
        out = ET.SubElement(case, "system-out")
        out.text = xml_text(f"known issue, not a failure: {summary}\n"
                            f"reason: {issue.get('reason', '')}\nlink: {issue.get('link', '')}")
    return case


def _failure_text(record: CheckRecord) -> str:
    parts = [record.message]
    if record.divergence is not None:
        parts.append(f"first divergence: {record.divergence}")
    if record.log_tail:
        parts.append("engine log, last lines:\n" + record.log_tail[-_LOG_TAIL_CHARS:])
    return "\n\n".join(p for p in parts if p)


def junit_xml(suites: Iterable[ET.Element], name: str) -> str:
    root = ET.Element("testsuites", {"name": xml_text(name)})
    for suite in suites:
        root.append(suite)
    for total in ("tests", "failures", "errors", "skipped"):
        root.set(total, str(sum(int(s.get(total)) for s in root)))
    root.set("time", f"{sum(float(s.get('time')) for s in root):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, suites: Iterable[ET.Element], name: str) -> Path:
    write_text_atomic(path, junit_xml(suites, name))
    return path
