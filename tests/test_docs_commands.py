"""The commands the docs show work as written: docs/nightly.md's sample
pipelines parse as YAML, and the run each shard step gives is one pytest
accepts (collected on the GPU tier, with the GPU count and the engine's
interpreter filled in as the machine would); the README's shard, merge and
list-the-checks commands are the ones the harness takes."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.memory.nvml import nvml_unavailable_reason

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = (ROOT / "docs" / "nightly.md").read_text()
README = (ROOT / "README.md").read_text()


def _yaml_blocks() -> dict[str, dict]:
    blocks = re.findall(r"```yaml\n(# (\S+)\n.*?)```", NIGHTLY, re.S)
    return {name: yaml.safe_load(text) for text, name in blocks}


def _shard_command(script: str, values: dict[str, str]) -> list[str]:
    """The shard step's pytest line, continuations joined, the shell's
    substitutions filled in from `values`."""
    line = re.search(r"(\.venv/bin/python -m pytest scenarios .*?)(?:\|\||\n(?!\s))",
                     script.replace("\\\n", " ") + "\n", re.S).group(1)
    for pattern, value in values.items():
        line = line.replace(pattern, value)
    assert "$" not in line, line
    return shlex.split(line)


def test_both_sample_pipelines_parse():
    blocks = _yaml_blocks()
    assert set(blocks) == {".buildkite/nightly.yml", ".github/workflows/nightly.yml"}
    assert [s["key"] for s in blocks[".buildkite/nightly.yml"]["steps"] if "key" in s] == ["shards"]
    assert set(blocks[".github/workflows/nightly.yml"]["jobs"]) == {"shard", "merge"}


def _buildkite_run() -> list[str]:
    [shards] = [s for s in _yaml_blocks()[".buildkite/nightly.yml"]["steps"] if s.get("key") == "shards"]
    return _shard_command(shards["command"].replace("$$", "$"), {
        "$(nvidia-smi -L | wc -l)": "0", '"$ENGINE_PYTHON"': sys.executable, '"$I/$SHARDS"': "1/4",
        "$BUILDKITE_BUILD_NUMBER-$I": "7-1"})


def _actions_run() -> list[str]:
    steps = _yaml_blocks()[".github/workflows/nightly.yml"]["jobs"]["shard"]["steps"]
    [script] = [s["run"] for s in steps if s.get("id") == "run"]
    return _shard_command(script, {"$(nvidia-smi -L | wc -l)": "0", "/opt/vllm/bin/python": sys.executable,
                                   "${{ matrix.shard }}": "1", "${{ github.run_id }}": "7"})


@pytest.mark.parametrize("command", [_buildkite_run, _actions_run], ids=["buildkite", "actions"])
def test_each_shard_step_runs_a_selection_pytest_accepts(command, tmp_path):
    argv = command()
    assert argv[:4] == [".venv/bin/python", "-m", "pytest", "scenarios"]
    assert {"--tier", "gpu", "--shard", "--history", "--results-dir", "--dist", "loadscope"} <= set(argv)
    argv = [sys.executable, *argv[1:], "--collect-only", "-q"]
    argv[argv.index("--history") + 1] = str(tmp_path / "history.jsonl")  # none yet: every group by hash
    argv[argv.index("--results-dir") + 1] = str(tmp_path / "shard")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "scenarios/test_" in done.stdout


def test_the_merge_the_docs_show_is_the_harness_command():
    for text in (NIGHTLY, README):
        assert ".venv/bin/python -m harness report merge " in text
    help_text = subprocess.run([sys.executable, "-m", "harness", "report", "merge", "--help"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60).stdout
    assert "--history" in help_text and "-o OUTPUT" in help_text


@pytest.mark.skipif(nvml_unavailable_reason() is None, reason="on a GPU machine it runs for real (minutes)")
def test_the_gpu_check_the_readme_names_runs_and_says_why_each_check_skips():
    assert "`tests/gpu/check`" in README
    done = subprocess.run([str(ROOT / "tests" / "gpu" / "check")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert re.search(r"\d+ skipped in", done.stdout) and "NVML unavailable" in done.stdout


def test_every_python_command_of_the_readme_names_the_venvs_interpreter():
    """The system python has none of the harness's packages: `python -m
    fixtures...` fails there, `.venv/bin/python -m fixtures...` works."""
    bare = [m.group(0) for m in re.finditer(r"(?<![\w./-])python3?(?:\.\d+)? -m \S+", README)]
    assert bare == []


def test_the_readmes_list_the_checks_command_lists_them_and_runs_nothing(tmp_path):
    [command] = re.findall(r"^(\.venv/bin/python -m pytest scenarios --collect-only -q --stress)$", README, re.M)
    done = subprocess.run([sys.executable, *shlex.split(command)[1:], "--results-dir", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = [line for line in done.stdout.splitlines() if "::" in line]
    assert listed == (ROOT / "tests" / "data" / "scenario_check_ids_cpu.txt").read_text().splitlines()
    assert not (tmp_path / "run").exists()
