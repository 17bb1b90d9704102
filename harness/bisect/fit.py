"""`--fit PKG`: the newest release of a package with which an end's engine
starts, where the end failed at start-up inside that package.

The candidates are the package's releases that the engine's own
requirements allow, that the index held on the end's day, and that are
older than the one the end failed with. A binary search over them, each try
an install of the end beside `PKG==V` and one run of the check: "starts" is
a try whose check ran (passed, or failed inside the check). It assumes that
an engine that starts beside a release starts beside the older ones too, as
a library's stricter checks come with its newer releases. Each try's
outcome is kept (`fit-PKG.json` in the bisect's folder), so a bisect run
again repeats none; the venv of a try that did not start is deleted (each
is gigabytes).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.bisect.search import FAIL, PASS, Outcome, Store
from harness.bisect.versions import VersionsError, index_files, version_of_file
from harness.engines.venvs import EngineVenv
from harness.index import parse_time


class FitError(ValueError):
    pass


@dataclass
class Fit:
    package: str
    ends: list[str]
    candidates: list[str]               # oldest first
    tries: dict[str, bool] = field(default_factory=dict)  # version -> every end started beside it
    kept: str | None = None

    @property
    def note(self) -> str:
        tried = ", ".join(f"{v} {'starts' if ok else 'does not'}" for v, ok in sorted(
            self.tries.items(), key=lambda kv: Version(kv[0])))
        span = f"{self.candidates[0]} to {self.candidates[-1]}" if self.candidates else "none"
        ends = " and ".join(self.ends)
        if self.kept is None:
            return (f"--fit {self.package}: no release of it from {span} lets {ends} start (tried {tried})")
        return (f"with {self.package}=={self.kept}, fitted: the newest of {len(self.candidates)} releases "
                f"({span}) that {ends} allows on its day with which it starts (tried {tried})")


def requirement_of(venv: EngineVenv, dist: str, package: str) -> Requirement | None:
    """The engine's own requirement on `package`, read from its metadata in the venv."""
    folder = f"{canonicalize_name(dist).replace('-', '_')}-*.dist-info"
    metadata = next(venv.path.glob(f"lib/python*/site-packages/{folder}/METADATA"), None)
    for line in metadata.read_text(encoding="utf-8", errors="replace").splitlines() if metadata else []:
        if line.startswith("Requires-Dist:"):
            try:
                req = Requirement(line.split(":", 1)[1].strip())
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) == canonicalize_name(package) and not (req.marker and "extra" in str(req.marker)):
                return req
    return None


def candidates(package: str, requirement: Requirement | None, failing: str | None, cutoff: str | None,
               index_url: str) -> list[str]:
    """The releases to try, oldest first: allowed by the engine, on the
    index before the cut-off, older than the one that failed."""
    try:
        files = index_files(package, index_url)
    except VersionsError as e:
        raise FitError(str(e)) from None
    before = parse_time(cutoff) if cutoff else None
    found: set[Version] = set()
    for f in files:
        version = version_of_file(package, f.filename)
        if version is None or version.is_prerelease:
            continue
        if before is not None and (f.upload_time is None or f.upload_time >= before):
            continue
        if requirement is not None and not requirement.specifier.contains(version):
            continue
        found.add(version)
    try:
        ceiling = Version(failing) if failing else None
    except InvalidVersion:
        ceiling = None
    return [str(v) for v in sorted(found) if ceiling is None or v < ceiling]


def started(outcome: Outcome) -> bool:
    """The check ran: the engine started."""
    return outcome.status in (PASS, FAIL)


def search(package: str, ends: list[str], versions: list[str],
           try_with: Callable[[str, str], Outcome], store: Store,
           drop: Callable[[str, str], None] = lambda end, version: None, log=print) -> Fit:
    """The newest of `versions` (oldest first) beside which every end starts.
    `try_with(end, version)` runs the check on `end` with `package==version`;
    `drop(end, version)` deletes that try's venv."""
    fit = Fit(package, ends, versions)

    def starts(version: str) -> bool:
        for end in ends:
            key = f"{package}=={version} on {end}"
            runs = store.outcomes(key)
            if not runs:
                runs = [try_with(end, version)]
                store.add(key, runs[0])
            ok = started(runs[0])
            log(f"bisect: fit: {end} beside {package}=={version} "
                f"{'starts' if ok else 'does not start'}{'' if ok else ': ' + runs[0].detail[:160]}")
            if not ok:
                drop(end, version)
                fit.tries[version] = False
                return False
        fit.tries[version] = True
        return True

    lo, hi = -1, len(versions)  # versions[lo] starts (none yet), versions[hi] does not (the one that failed)
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if starts(versions[middle]):
            lo = middle
        else:
            hi = middle
    fit.kept = versions[lo] if lo >= 0 else None
    return fit


def fit_state(folder: Path, package: str) -> Path:
    return folder / f"fit-{canonicalize_name(package)}.json"
