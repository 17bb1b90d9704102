"""Which profiles a selection of checks needs: each selected check's model
and the numeric paths its comparisons declare (`numeric_paths`), read by
collecting the selection as pytest would run it, in a process of its own
(harness/plugins/calibration_needs.py writes what it collected)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEEDS_PLUGIN = "harness.plugins.calibration_needs"
NEEDS_ENV = "MMHARNESS_CALIBRATION_NEEDS"


class SelectionError(RuntimeError):
    pass


def needed(pytest_args: list[str], work: Path) -> dict[str, list[str]]:
    """{model: [numeric paths]} of the scenario checks `pytest_args` select."""
    out = work / "needs.json"
    args = pytest_args if any(a.startswith("scenarios") for a in pytest_args) else ["scenarios", *pytest_args]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", NEEDS_PLUGIN, *args],
                          cwd=ROOT, env={**os.environ, NEEDS_ENV: str(out)}, capture_output=True, text=True,
                          timeout=600)
    if done.returncode not in (0, 5) or not out.exists():
        raise SelectionError(f"collecting the selection {' '.join(args)} failed (exit {done.returncode}): "
                             f"{(done.stdout + done.stderr).strip()[-2000:]}")
    return json.loads(out.read_text())
