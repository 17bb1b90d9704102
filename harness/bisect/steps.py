"""One probe of a bisect: the check run once on one engine version, in a
normal run directory of its own (`results.json`, `report.html`), so `report
diff` works between any two steps.

The version's engine venv is installed on first use; an install that fails
is `untestable` with pip's words. The step's outcome is read from the
check's records: pass; a failure inside the check (a known issue included)
with its cause; anything else is untestable: skipped, unsupported, a harness
error, and an engine that did not start, whatever its cause (read from the
record's evidence), with the start-up error's last line and the package
that raised it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.bisect.search import FAIL, PASS, UNTESTABLE, Outcome
from harness.children import run_child
from harness.engines import venvs
from harness.engines.asof import RELEASE_DAY
from harness.engines.startup import never_started, startup_error
from harness.results.record import CheckRecord
from harness.results.run import ResultsError, load_results

ROOT = Path(__file__).resolve().parents[2]
# A step is one check (or its parametrizations) and its engines: well under this.
STEP_TIMEOUT_S = 3600
# How an outcome's detail begins where the engine did not start.
STARTUP_DETAIL = "the engine did not start: "


def judge(records: list[CheckRecord], check: str, installed: dict[str, str] | None = None) -> Outcome:
    """The check's records (its parametrizations, when `check` names a
    function) as one outcome: any failure inside the check fails, with the
    first one's cause. `installed`: the venv's distributions and versions,
    to name the version of a package that refused the engine's start."""
    mine = [r for r in records if r.id == check or r.id.startswith(check + "[")]
    if not mine:
        return Outcome(UNTESTABLE, detail=f"{check} was not run")
    identity = {"engine": mine[0].engine, "engine_version": mine[0].engine_version}
    failed = [r for r in mine if r.verdict in ("fail", "known issue") and not never_started(r)]
    if failed:
        return Outcome(FAIL, failed[0].cause, failed[0].message[:500], identity)
    unstarted = [r for r in mine if never_started(r)]
    if unstarted:
        error = startup_error(unstarted[0], installed)
        return Outcome(UNTESTABLE, unstarted[0].cause, f"{STARTUP_DETAIL}{error.said}",
                       identity | {"startup": error.to_dict()})
    other = [r for r in mine if r.verdict != "pass"]
    if other:
        r = other[0]
        return Outcome(UNTESTABLE, r.cause, f"{r.verdict}: {r.cause or ''} {r.message[:300]}".strip(), identity)
    return Outcome(PASS, extra=identity)


@dataclass
class StepRunner:
    """Runs `check` on `dist==version`; calling it is one probe."""
    check: str
    dist: str
    folder: Path
    tier: str = "cpu"
    keyword: str | None = None
    pytest_args: tuple[str, ...] = ()
    pip_args: dict[str, tuple[str, ...]] = field(default_factory=dict)  # per version: where pip finds it
    pins: tuple[str, ...] = ()  # installed beside every version (transformers==5.5.4)
    as_of: str = RELEASE_DAY    # each version's venv resolved as of its release's day, a given day, or now
    index_url: str | None = None  # whose upload times give a release's day
    venv_root: Path | None = None
    log: object = print
    runs: dict[str, int] = field(default_factory=dict)

    def run_dir(self, version: str) -> Path:
        n = self.runs.get(version, 0)
        steps = self.folder / "steps"
        while (steps / (version if n == 0 else f"{version}-rerun{n}")).exists():
            n += 1
        self.runs[version] = n + 1
        return steps / (version if n == 0 else f"{version}-rerun{n}")

    def __call__(self, version: str) -> Outcome:
        spec = f"{self.dist}=={version}"
        started = time.monotonic()
        try:
            venv = venvs.install(spec, self.venv_root, pins=self.pins, as_of=self.as_of, index_url=self.index_url,
                                 extra_pip_args=self.pip_args.get(version, ()), log=self.log)
        except venvs.InstallFailed as e:
            return Outcome(UNTESTABLE, detail=f"install failed: {e.message}",
                           extra={"duration_s": round(time.monotonic() - started, 1)})
        run_dir = self.run_dir(version)
        cmd = [sys.executable, "-m", "pytest", self.check, "-q", "-p", "no:cacheprovider",
               "--tier", self.tier, "--engine-python", str(venv.python),
               "--results-dir", str(run_dir), "--history", str(self.folder / "history.jsonl"),
               *(("-k", self.keyword) if self.keyword else ()), *self.pytest_args]
        self.log(f"bisect: running {self.check} on {spec} -> {run_dir}")
        env = dict(os.environ, **({"HF_HUB_OFFLINE": "1"} if self.tier == "cpu" else {}))
        try:
            out = run_child(cmd, cwd=ROOT, env=env, timeout=STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Outcome(UNTESTABLE, detail=f"the step ran past {STEP_TIMEOUT_S} s",
                           extra={"run_dir": str(run_dir)})
        took = round(time.monotonic() - started, 1)
        try:
            records = load_results(run_dir).records
        except ResultsError:
            tail = (out.stdout + out.stderr).strip().splitlines()[-5:]
            return Outcome(UNTESTABLE, detail=f"no results (pytest exit {out.returncode}): " + " | ".join(tail),
                           extra={"run_dir": str(run_dir), "duration_s": took})
        outcome = judge(records, self.check, venv.installed)
        return Outcome(outcome.status, outcome.cause, outcome.detail,
                       outcome.extra | {"run_dir": str(run_dir), "duration_s": took} | venv.summary)
