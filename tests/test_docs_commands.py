"""The commands the docs show work as written: docs/nightly.md's sample
pipelines parse as YAML, and the run each shard step gives is one pytest
accepts (collected on the GPU tier, with the GPU count and the engine's
interpreter filled in as the machine would); the README's shard, merge and
list-the-checks commands are the ones the harness takes; and every command
the README and docs/ show works: run where that is quick on the CPU, else
checked with `make -n`, `--collect-only` or `--help`."""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.memory.nvml import nvml_unavailable_reason
from tests.doc_pages import doc_commands, pages

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


def test_every_python_command_of_the_readme_and_docs_names_the_venvs_interpreter():
    """The system python has none of the harness's packages: `python -m
    fixtures...` fails there, `.venv/bin/python -m fixtures...` works."""
    for page in pages():
        bare = [m.group(0) for m in re.finditer(r"(?<![\w./-])python3?(?:\.\d+)? -m \S+", page.read_text())]
        assert bare == [], page.name


def test_the_readmes_list_the_checks_command_lists_them_and_runs_nothing(tmp_path):
    [command] = re.findall(r"^(\.venv/bin/python -m pytest scenarios --collect-only -q --stress)$", README, re.M)
    done = subprocess.run([sys.executable, *shlex.split(command)[1:], "--results-dir", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = [line for line in done.stdout.splitlines() if "::" in line]
    assert listed == (ROOT / "tests" / "data" / "scenario_check_ids_cpu.txt").read_text().splitlines()
    assert not (tmp_path / "run").exists()


# --- every command the README and the docs show ------------------------------------

PLACEHOLDERS = ("…", "...")
# What the interpreter runs: checked by walking its --help to the subcommand.
CLI_MODULES = ("harness", "fixtures.tiny_models", "fixtures.adapters")


def _words(command: str) -> list[str]:
    """The command's words: its VAR=value prefix, optional `[...]` groups and
    placeholders left out, a trailing `&` too."""
    text = re.sub(r"\s\[[^\]]*\]", "", command).removesuffix("&")
    words = shlex.split(text)
    while words and re.fullmatch(r"[A-Z][A-Z0-9_]*=.*", words[0]):
        words.pop(0)
    return [w for w in words if w not in PLACEHOLDERS]


def _is_synopsis(command: str) -> bool:
    return any(p in command for p in PLACEHOLDERS) or " [" in command


def _run(argv: list[str], timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


@functools.lru_cache(maxsize=None)
def _help(*argv: str) -> str:
    """The command's --help, run once however many commands of the docs
    name it."""
    done = _run([*argv, "--help"], timeout=60)
    assert done.returncode == 0, (argv, done.stderr[-1500:])
    return done.stdout


def _help_of(module: str, words: list[str]) -> tuple[str, list[str]]:
    """The help text of the deepest subcommand `words` name, walking each
    level's `{a,b,...}` choices; and the alternatives (`diff|merge`) taken."""
    path, help_text = [], ""
    for word in [None, *words]:
        if word is not None:
            choices = re.search(r"\{([\w,-]+)\}", help_text)
            alternatives = word.split("|")
            if not choices or not set(alternatives) <= set(choices.group(1).split(",")):
                break
            path.append(alternatives)
        help_text = _help(sys.executable, "-m", module, *[a[0] for a in path])
    for alternatives in path:  # every alternative of a|b|c has a help of its own
        for other in alternatives[1:]:
            _help(sys.executable, "-m", module, *[a[0] for a in path if a is not alternatives], other)
    return help_text, [a[0] for a in path]


def _options(words: list[str]) -> set[str]:
    return {w.split("=", 1)[0] for w in words if w.startswith("--")}


def _check_make(words: list[str]) -> None:
    done = _run(["make", "-n", *words[1:]])
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]


def _check_pytest(words: list[str], synopsis: bool, tmp_path: Path) -> None:
    args = words[words.index("pytest") + 1:]
    if "--help" in args or synopsis or any(p in " ".join(args) for p in PLACEHOLDERS):
        # The options of the folder it names (scenarios/conftest.py adds its own).
        folders = [a.split("::")[0].split("/")[0] for a in args if not a.startswith("-")][:1]
        assert _options(args) <= set(re.findall(r"--[\w-]+", _help(sys.executable, "-m", "pytest", *folders))), args
        return
    argv = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    argv += [flag for flag in ("--collect-only", "-q") if flag not in args]
    if args[0].startswith("scenarios"):
        argv += ["--results-dir", str(tmp_path / "run")]
    done = _run(argv)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    assert "::" in done.stdout


def _check_module(module: str, words: list[str]) -> None:
    rest = words[words.index(module) + 1:]
    if module in CLI_MODULES:
        help_text, _ = _help_of(module, rest)
        assert _options(rest) <= set(re.findall(r"--[\w-]+", help_text)), (rest, help_text[-1500:])
        return
    # Another package's entry point (vLLM's server): present in the venv,
    # not started (that is an engine, minutes).
    top, _, sub = module.partition(".")
    spec = importlib.util.find_spec(top)
    assert spec is not None and spec.submodule_search_locations, f"{top} is not installed"
    base = Path(list(spec.submodule_search_locations)[0]) / Path(*sub.split("."))
    assert base.with_suffix(".py").is_file() or (base / "__main__.py").is_file(), module


def check_command(command: str, tmp_path: Path) -> None:
    """Run the command where that is quick and needs nothing the CPU lacks;
    else check what it names: `make -n` for a make target, `--collect-only`
    for a pytest selection, `--help` (its options included) for the CLIs."""
    words, synopsis = _words(command), _is_synopsis(command)
    if words[0] == "make":
        _check_make(words)
    elif words[0] == "pytest" or words[1:3] == ["-m", "pytest"]:
        _check_pytest(words, synopsis, tmp_path)
    elif words[0] == ".venv/bin/python" and words[1] == "-m":
        _check_module(words[2], words)
    elif words[0] == "tests/gpu/check":
        assert os.access(ROOT / words[0], os.X_OK)
    else:
        raise AssertionError(f"a command the docs test cannot check yet: {command}")


@pytest.mark.parametrize(("page", "command"), doc_commands(), ids=lambda v: v[:80])
def test_every_command_of_the_readme_and_the_docs_works(page, command, tmp_path):
    check_command(command, tmp_path)


def test_the_docs_show_the_commands_a_user_needs():
    commands = {command for _, command in doc_commands()}
    assert {"make run", "make test"} <= commands
    assert any("--engine-python" in c for c in commands) and any("--engine-url" in c for c in commands)


@pytest.mark.parametrize("wrong", ["make runn", ".venv/bin/python -m harness report merge --no-such-option x",
                                   ".venv/bin/python -m pytest scenarios --no-such-option",
                                   ".venv/bin/python -m vllm.no_such_module", "curl http://example.com"])
def test_a_wrong_command_fails_its_check(wrong, tmp_path):
    with pytest.raises(AssertionError):
        check_command(wrong, tmp_path)
