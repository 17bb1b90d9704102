"""pytest plugin, loaded only by calibration's collection (`-p
harness.plugins.calibration_needs`, harness/calibration/selection.py):
each selected check's model and the numeric paths its comparisons declare,
written as {model: [paths]} to $MMHARNESS_CALIBRATION_NEEDS."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.plugins.common import model_entry_of, numeric_paths_of

NEEDS_ENV = "MMHARNESS_CALIBRATION_NEEDS"


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
