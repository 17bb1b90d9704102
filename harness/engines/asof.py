"""The day an engine venv is resolved as of: a release as its users had it.

By default a release's dependencies are resolved as they stood when it was
published: pip's `--uploaded-prior-to` at a cut-off just after the
release's latest file (pip rejects files uploaded at or after the cut-off,
and a release's wheels for different platforms have different times).
`--as-of DATE` chooses another day (what the index held before DATE 00:00
UTC, or before an ISO time), `--as-of now` today's index, unfiltered. The
choice is part of the venv's identity: its folder and its manifest.
"""
from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

from packaging.version import Version

from harness.index import IndexFile, IndexUnreadable, project_files, version_of_file

RELEASE_DAY, NOW = "release", "now"
AS_OF_HELP = ("the day the engine's dependencies are resolved as of: a date (2026-08-15: what the index held "
              "before that day, UTC), an ISO time, or now (today's index); default: each release's own day")


class AsOfError(ValueError):
    pass


def parse_as_of(text: str | None) -> str:
    """An --as-of choice as a question keeps it: "release", "now", or a UTC
    time in ISO form."""
    if text in (None, "", RELEASE_DAY):
        return RELEASE_DAY
    if text == NOW:
        return NOW
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AsOfError(f"--as-of {text!r}: give a date (2026-08-15), an ISO time (2026-08-15T12:00:00Z) "
                        f"or now") from None
    return _iso(when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc))


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class AsOf:
    """pip's cut-off (None: today's index, unfiltered), why it is that, and,
    for `now`, the UTC day it was resolved on."""
    cutoff: str | None
    basis: str              # "release", "given" or "now"
    day: str | None = None  # `now` only: its UTC day, YYYY-MM-DD

    @property
    def label(self) -> str:
        """The part of a venv's folder name: 20260811T111704Z, or now-20261205."""
        if self.cutoff is None:
            return f"now-{(self.day or '').replace('-', '')}"
        return self.cutoff.replace("-", "").replace(":", "")

    @property
    def said(self) -> str:
        if self.cutoff is None:
            return f"as of now ({self.day}, no upload-time filter)"
        why = {"release": "the release's day", "given": "--as-of"}[self.basis]
        return f"as of {self.cutoff} ({why})"

    def to_dict(self) -> dict:
        return {"cutoff": self.cutoff, "basis": self.basis, "day": self.day}

    @classmethod
    def from_dict(cls, d: dict) -> AsOf:
        return cls(d.get("cutoff"), d.get("basis", "given"), d.get("day"))


def resolve(choice: str, dist: str, version: str, index_url: str, *, today: dt.date | None = None) -> AsOf:
    """The AsOf of one release for a choice of parse_as_of."""
    if choice == NOW:
        return AsOf(None, NOW, (today or dt.datetime.now(dt.timezone.utc).date()).isoformat())
    if choice != RELEASE_DAY:
        return AsOf(choice, "given")
    return AsOf(_iso(release_cutoff(_files(dist, index_url), dist, version)), RELEASE_DAY)


@functools.lru_cache(maxsize=16)
def _files(dist: str, index_url: str) -> tuple[IndexFile, ...]:
    try:
        return tuple(project_files(dist, index_url))
    except IndexUnreadable as e:
        raise AsOfError(f"the release's day cannot be read: {e}") from None


def release_cutoff(files: tuple[IndexFile, ...] | list[IndexFile], dist: str, version: str) -> dt.datetime:
    """Just after the release's latest file: the whole second after it."""
    mine = [f for f in files if version_of_file(dist, f.filename) == Version(version)]
    if not mine:
        raise AsOfError(f"the index lists no file of {dist} {version}")
    untimed = [f.filename for f in mine if f.upload_time is None]
    if untimed:
        raise AsOfError(f"the index gives no upload time for {', '.join(untimed[:3])}: give --as-of DATE "
                        f"or --as-of now")
    latest = max(f.upload_time for f in mine)
    return latest.replace(microsecond=0) + dt.timedelta(seconds=1)
