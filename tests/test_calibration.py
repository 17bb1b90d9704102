"""Calibration on the real engine: over the noisy-engine fault it writes the
profile of that host kind, calibrated on the pinned release (never on the
candidate the run names), and the checks on that engine then pass."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.calibration.pinned import pinned_spec
from harness.checks.noise import load_profiles
from tests.scenario_runs import run_scenarios

ROOT = Path(__file__).resolve().parents[1]
NOISE = 3e-5
MODEL = "tiny-gemma3n"
CHECK = "batch_invariance and clip1 and not equal"  # one check: the ragged batch of clip1
SELECTION = ["scenarios/test_ragged_audio.py", "--model", MODEL, "-k", CHECK]

pytestmark = pytest.mark.engine


@pytest.fixture
def candidate(tmp_path) -> tuple[Path, Path]:
    """A stand-in candidate venv whose python notes every start, then runs the real one."""
    called = tmp_path / "candidate-started"
    python = tmp_path / "candidate" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho \"$@\" >> {called}\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    return python.parent.parent, called


def checks(records: dict) -> list:
    """The run's check records (its engines have records of their own)."""
    return [r for name, r in records.items() if name.startswith("test_")]


def test_calibration_over_the_noisy_engine_makes_the_profile_its_checks_pass_by(tmp_path, candidate, monkeypatch):
    profiles = tmp_path / "noise-profiles.toml"
    monkeypatch.setenv("MMHARNESS_NOISE_PROFILES", str(profiles))
    venv, started = candidate

    done = subprocess.run([sys.executable, "-m", "harness", "calibrate", "--missing", "--engine-noise", str(NOISE),
                           "--engine-python", str(venv), *SELECTION],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800, env=os.environ)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The premise: this host kind had no profile for the check (what the
    # check says then is tests/test_check_vocabulary.py's).
    assert f"lacks 1 noise profile(s) the selected checks need: calibrating {MODEL} (same-stack)" in done.stdout
    [profile] = load_profiles(profiles)
    assert (profile.model, profile.path) == (MODEL, "same-stack") and profile.host.endswith(f"+noise@{NOISE:g}")
    assert profile.calibrated_with == pinned_spec("cpu").replace("==", " ")
    assert profile.logprob_steps > 0 and not profile.refused, profile  # the noisy engine is noisy
    assert not started.exists(), f"the candidate was started: {started.read_text()}"

    again = subprocess.run([sys.executable, "-m", "harness", "calibrate", "--missing", "--engine-noise", str(NOISE),
                            *SELECTION], cwd=ROOT, capture_output=True, text=True, timeout=600, env=os.environ)
    assert again.returncode == 0 and "has a noise profile for every path" in again.stdout, again.stdout

    after, _ = run_scenarios("test_ragged_audio.py", tmp_path / "after", "--model", MODEL,
                             "-k", CHECK, f"--engine-noise={NOISE}")
    [rec] = checks(after)
    assert rec.verdict == "pass", rec.message
    judged = rec.evidence["noise_profiles"]["same-stack"]
    assert judged["judged_on"] == profile.host and judged["self_calibrated"]
