"""Failures that say one thing, folded into one entry for "Failures by
cause": six cache-matrix cells that diverged alike read as one line with
six checks under it, not six lines.

A failure folds with those of its verdict and cause whose message, first
line only (what the section shows), is the same once the input's label,
positions, token ids and other numbers are taken out. A known issue folds
with the others of its finding (the registry entry's link) and cause,
whatever their messages: the registry already says they are one thing."""
from __future__ import annotations

import dataclasses
import re

from harness.verdicts import Verdict
from harness.report.format import first_line
from harness.results.record import CheckRecord

# "input 3-image@tower (reloaded): ..." names the request, not the fault.
INPUT = re.compile(r"\binput [^:]+:")
# A number standing alone, hexadecimal addresses included: not the digits
# of a name (tiny-gemma4) nor a version (0.32.0); a sentence's full stop
# after it is no part of it.
NUMBER = re.compile(r"(?<!\w)(?<!\d\.)(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?!\w|\.\d)")
# A list of numbers, however long: [3, 17, 40] and [5] alike.
NUMBERS = re.compile(r"\[N(?:, N)*\]")


@dataclasses.dataclass
class Fold:
    verdict: str
    cause: str
    message: str                 # the first check's, first line
    records: list[CheckRecord]
    link: str | None = None      # a known issue's finding


def normalized(message: str) -> str:
    """A message's first line with what differs between alike failures
    (input label, positions, token ids, numbers) taken out."""
    text = INPUT.sub("input …:", first_line(message))
    return NUMBERS.sub("[…]", NUMBER.sub("N", text))


def _finding(record: CheckRecord) -> str | None:
    if record.verdict != Verdict.KNOWN_ISSUE.value:
        return None
    return (record.known_issue or {}).get("link") or None


def fold(records: list[CheckRecord]) -> list[Fold]:
    """The records folded, in the order each fold's first record came."""
    folds: dict[tuple, Fold] = {}
    for record in records:
        link = _finding(record)
        key = record.verdict, record.cause, link or normalized(record.message)
        if key not in folds:
            folds[key] = Fold(record.verdict, record.cause or "unknown", first_line(record.message), [], link)
        folds[key].records.append(record)
    return list(folds.values())
