"""Bad fuzz options stop the run with one message before any engine
starts; a replay collects only its own check, for its own model."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.scenario_runs import ROOT


def _pytest(*args: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "scenarios/test_fuzz_multimodal.py", "--collect-only",
                           "-q", "--results-dir", str(tmp_path / "run"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, says", [
    (("--fuzz-budget=0",), "--fuzz-budget must be a number of seconds above 0"),
    (("--fuzz-shrink=inf",), "--fuzz-shrink must be a number of seconds above 0"),
    (("--fuzz-replay=/nonexistent/workload.json",), "--fuzz-replay: /nonexistent/workload.json: not a workload"),
])
def test_a_bad_fuzz_option_is_one_message(args, says, tmp_path):
    out = _pytest(*args, tmp_path=tmp_path)
    assert out.returncode == 4 and says in out.stderr, out.stdout[-2000:] + out.stderr[-2000:]


def test_a_replay_collects_its_own_check_for_its_own_model(tmp_path):
    spec = tmp_path / "workload.json"
    spec.write_text(json.dumps({"cause": "mismatch", "spec": {"version": 1, "model": "tiny-gemma4", "max_tokens": 2,
                                                              "requests": []}}))
    out = _pytest(f"--fuzz-replay={spec}", tmp_path=tmp_path)
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    assert collected == ["scenarios/test_fuzz_multimodal.py::test_fuzz_replay[tiny-gemma4]"], out.stdout[-2000:]
    plain = [line for line in _pytest(tmp_path=tmp_path).stdout.splitlines() if "::" in line]
    assert plain and not any("test_fuzz_replay" in line for line in plain)
