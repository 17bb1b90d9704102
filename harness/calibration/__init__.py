"""Calibration: the noise profiles of this host kind, measured on the tier's
pinned release (`python -m harness calibrate`, `make calibrate`).

For each model a selection of checks runs on, and each numeric path those
checks declare (harness.calibration.selection), the pinned release answers
the calibration's own workloads both ways the path compares
(harness.calibration.paths); the figures (harness.calibration.measure)
make the profile, or a refusal where they are not noise. One pool of
engines per model serves all its paths. Profiles go to the user's cache
(harness.checks.noise.cache_file), or into the committed file with
`commit=True` (the project's own machines).
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path

from harness.calibration import paths as procedures
from harness.calibration.measure import TOP_K, Bounds, Figures, NotNoise, bounds, measure
from harness.calibration.pinned import pinned_interpreter
from harness.checks.noise import NoiseProfile, all_profiles, batch_exact_others, four_bit_path, save_profiles
from harness.verdicts import CheckFailure
from harness.engines.hosts import host_kind, same_kind
from harness.engines.pool import EnginePool
from harness.models import models_for
from harness.setup.cpu_features import cpu_identity
from harness.schedule.placement import for_tier


@dataclass
class Outcome:
    """One model's path, calibrated or not, and why."""
    model: str
    path: str
    host: str
    seconds: float = 0.0
    profile: NoiseProfile | None = None
    figures: Figures | None = None
    refused: str | None = None  # why no profile was made

    def line(self) -> str:
        head = f"calibrate: {self.model} {self.path} on {self.host}"
        if self.figures is not None:
            f = self.figures
            head += (f": {f.pairs} pairs, {f.positions} positions, max |Δlogprob| {f.max_steps:.2f} steps "
                     f"({f.max_delta_nats:.4f} nats), {f.splits} split(s) ({f.split_rate:.1%}), widest margin "
                     f"{f.max_split_margin:.3f} nats, {f.max_splits_per_answer} at most in one answer")
        if self.profile is not None and not self.refused:
            p = self.profile
            head += (f" -> logprob_steps {p.logprob_steps}, split_margin_nats {p.split_margin_nats}, "
                     f"max_splits {p.max_splits}")
        if self.refused:
            head += f" -> REFUSED: {self.refused}"
            if self.figures is not None and self.figures.notes:
                head += " [" + "; ".join(self.figures.notes[:3]) + (" ..." if len(self.figures.notes) > 3 else "") + "]"
        return head + f" ({self.seconds:.0f} s)"


def missing(needs: dict[str, list[str]], tier: str, predicted_host: str, isa: list[str],
            models_file: Path | None = None) -> dict[str, list[str]]:
    """The needs no profile meets on the predicted host kind (the GPU tier's
    attention backend is known only once an engine runs: any of this
    device's profiles counts)."""
    entries = {e.name: e for e in models_for(tier, models_file)}
    have = all_profiles()
    out = {}
    for model, wanted in needs.items():
        dtype = entries[model].engine_args.get("dtype")
        lacking = [p for p in wanted if not any(
            (q.tier, q.model, q.path) == (tier, model, actual_path(p, isa)) and q.dtype in ("*", dtype)
            and same_kind(q.host, predicted_host) for q in have)]
        if lacking:
            out[model] = lacking
    return out


def actual_path(path: str, isa: list[str]) -> str:
    """A declared 4-bit path is the host's own (W4A8 with AMX)."""
    return four_bit_path(isa) if path in procedures.FOUR_BIT_PATHS else path


def calibrate(needs: dict[str, list[str]], *, tier: str, kernels: str, noise: float, logs_dir: Path,
              models_file: Path | None = None, commit: bool = False, log=print) -> list[Outcome]:
    """Calibrate each model's paths in `needs` on the pinned release; write
    the profiles made (the cache, or the committed file) and return every
    outcome, refusals included."""
    interpreter = pinned_interpreter(tier, kernels=kernels, noise=noise, log=log)
    ident = interpreter.identity
    release = f"{ident['distribution']} {ident['version']}"
    isa = interpreter.host.get("isa", [])
    entries = {e.name: e for e in models_for(tier, models_file)}
    outcomes: list[Outcome] = []
    for model, wanted in needs.items():
        entry = entries[model]
        arch = entry.tiny_arch
        built = str(interpreter.build_tiny_model(arch, overrides=entry.build)) if arch else entry.model
        pool = EnginePool(interpreter, logs_dir / model, watch_memory=False, placement=for_tier(tier))
        bench = procedures.Bench(entry, built, pool, ident["version"])
        try:
            done = [_one(bench, path, release, log) for path in dict.fromkeys(actual_path(p, isa) for p in wanted)]
        finally:
            pool.close_all()
        outcomes += done
        made = [o.profile for o in done if o.profile is not None]  # refused ones too, saying why
        if made:  # each model's as soon as it is done: a later model's failure loses none of them
            save_profiles(made, commit=commit)
    return outcomes


def _one(bench: procedures.Bench, path: str, release: str, log) -> Outcome:
    entry, began = bench.entry, time.monotonic()
    outcome = Outcome(entry.name, path, host="(no engine started)")
    try:
        pairs = procedures.run_path(bench, path)
        outcome.host = _observed_host(bench)
        outcome.figures = measure(pairs)
        b = bounds(path, outcome.figures)
        refuse_on_exact_host_kind(entry.tier, outcome.host, entry.name, path, b)
    except procedures.NotCalibratable as e:
        outcome.refused = str(e)
    except CheckFailure as e:  # an engine of the path that did not start or answer
        outcome.refused = f"the pinned release did not run the path: {e.message}"
    except NotNoise as e:  # measured, and not noise: kept, so that its checks say why
        outcome.refused = str(e)
        outcome.profile = _profile(entry, path, outcome, release, None)
    else:
        outcome.profile = _profile(entry, path, outcome, release, b)
    outcome.seconds = time.monotonic() - began
    log(outcome.line())
    return outcome


def refuse_on_exact_host_kind(tier: str, host: str, model: str, path: str, b: Bounds,
                              profiles: list[NoiseProfile] | None = None) -> None:
    """Noise on one stack where the host kind is batch-exact for every
    other model (harness.checks.noise.batch_exact_others) is the model's
    own: its answers depend on their batch (Granite Speech Plus, finding
    014, measured 17.8 steps and 12 splits within the top-5 on `cpu:_C`,
    where every other model measured 0). A profile of it would excuse that
    dependence, so it is refused, and the path is then judged exact."""
    if b.logprob_steps == 0 and b.max_splits == 0:
        return
    others = batch_exact_others(tier, host, model, path, all_profiles() if profiles is None else profiles)
    if others is not None:
        raise NotNoise(f"noise on one stack where every other one-stack profile of this host kind "
                       f"({len({p.model for p in others})} models) is exact: the model's own batch "
                       f"dependence, not the host's")


def _profile(entry, path: str, outcome: Outcome, release: str, b: Bounds | None) -> NoiseProfile:
    f = outcome.figures
    notes = "; ".join(f.notes[:5])
    return NoiseProfile(
        entry.tier, outcome.host, entry.name, entry.engine_args.get("dtype", "*"), path,
        b.logprob_steps if b else 0.0, b.split_margin_nats if b else 0.0, b.max_splits if b else 0,
        calibrated_with=release, top_k=b.top_k if b else TOP_K,
        measured=(f"python -m harness calibrate: {f.pairs} answer pairs of the calibration's own workloads "
                  f"x {procedures.sampling(path).max_tokens} tokens, {dt.date.today().isoformat()}, {machine()}"),
        figures=f.to_dict(), note=notes if b else "",
        refused=(outcome.refused + (f" [{notes}]" if notes else "")) if not b else "")


def _observed_host(bench: procedures.Bench) -> str:
    """The host kind of the engines the path ran on: one, or it is no calibration."""
    kinds = {host_kind(bench.entry.tier, h.engine.identity)
             for h in [*bench.pool.handles.values(), *bench.pool.retired] if h.engine.identity.get("version")}
    if len(kinds) != 1:
        raise procedures.NotCalibratable(f"the engines ran on {len(kinds)} host kinds ({sorted(kinds)}): "
                                         "a profile is of one")
    return kinds.pop()


def machine() -> str:
    ident = cpu_identity()
    return f"{ident['model_name']} ({ident['vendor']} family {ident['family']} model {ident['model']})"
