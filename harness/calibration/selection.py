"""Which profiles a selection of checks needs: each selected check's model
and the numeric paths its comparisons declare (`numeric_paths`), read by
collecting the selection as pytest would run it, in a process of its own.

usage (the collecting side): pytest --collect-only -p harness.calibration.selection ...
with MMHARNESS_CALIBRATION_NEEDS=<file> set; it writes {model: [paths]} there.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.plugins.common import model_entry_of, numeric_paths_of

ROOT = Path(__file__).resolve().parents[2]
NEEDS_ENV = "MMHARNESS_CALIBRATION_NEEDS"


class SelectionError(RuntimeError):
    pass


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get(NEEDS_ENV)
    if not out:
        return
    needs: dict[str, list[str]] = {}
    for item in session.items:
        entry = model_entry_of(item)
        if entry is not None:
            paths = needs.setdefault(entry.name, [])
            paths += [p for p in numeric_paths_of(item) if p not in paths and not _tp_reference(item, p)]
    Path(out).write_text(json.dumps({model: paths for model, paths in needs.items() if paths}))


def _tp_reference(item: pytest.Item, path: str) -> bool:
    """A TP check at TP 1 is the TP path's reference, compared on no path."""
    callspec = getattr(item, "callspec", None)
    return path == "tp" and callspec is not None and callspec.params.get("tp") == 1


def needed(pytest_args: list[str], work: Path) -> dict[str, list[str]]:
    """{model: [numeric paths]} of the scenario checks `pytest_args` select."""
    out = work / "needs.json"
    args = pytest_args if any(a.startswith("scenarios") for a in pytest_args) else ["scenarios", *pytest_args]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", __name__, *args],
                          cwd=ROOT, env={**os.environ, NEEDS_ENV: str(out)}, capture_output=True, text=True,
                          timeout=600)
    if done.returncode not in (0, 5) or not out.exists():
        raise SelectionError(f"collecting the selection {' '.join(args)} failed (exit {done.returncode}): "
                             f"{(done.stdout + done.stderr).strip()[-2000:]}")
    return json.loads(out.read_text())
