"""`python -m harness calibrate`: which profiles the selection needs, what
this host kind lacks of them, the calibration of those, one line per path,
and the profiles as TOML to commit (`--print`)."""
from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

from harness.calibration import actual_path, calibrate, missing
from harness.calibration.pinned import NoPinnedRelease
from harness.calibration.selection import SelectionError, needed
from harness.checks.noise import all_profiles, cache_file
from harness.engines.hosts import host_kind, same_kind
from harness.engines.interpreter import EngineInterpreter
from harness.engines.devices import run_devices
from harness.memory.nvml import Nvml
from harness.preflight.devices import gpu_problems
from harness.results.status import ExitStatus

ROOT = Path(__file__).resolve().parents[2]


def calibrate_command(args: argparse.Namespace) -> int:
    host = EngineInterpreter(None, args.tier, kernels=args.engine_kernels, noise=args.engine_noise)
    if args.tier == "gpu" and (problems := gpu_problems(())):
        print(f"calibrate: {problems[0]}: the GPU tier's profiles are calibrated on its GPUs", file=sys.stderr)
        return ExitStatus.USAGE
    predicted = predicted_host(args.tier, host)
    selection = [*args.selection, "--tier", args.tier, "--engine-kernels", args.engine_kernels,
                 "--engine-noise", repr(args.engine_noise)]
    with tempfile.TemporaryDirectory(prefix="mmh-calibrate-") as tmp:
        try:
            needs = needed(selection, Path(tmp))
        except SelectionError as e:
            print(f"calibrate: {e}", file=sys.stderr)
            return ExitStatus.USAGE
    todo = missing(needs, args.tier, predicted, host.host.get("isa", []), args.models_file) if args.missing \
        else needs
    count = sum(len(p) for p in todo.values())
    if not count:
        print(f"calibrate: host kind {predicted} has a noise profile for every path the selected checks "
              f"declare ({sum(len(p) for p in needs.values())} paths of {len(needs)} models)")
        outcomes = []
    else:
        listed = "; ".join(f"{model} ({', '.join(paths)})" for model, paths in todo.items())
        why = f"lacks {count} noise profile(s) the selected checks need" if args.missing else \
            f"{count} noise profile(s) for the selected checks"
        print(f"calibrate: host kind {predicted}: {why}: calibrating {listed} on the pinned release "
              f"(see docs/tolerances.md)", flush=True)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        try:
            outcomes = calibrate(todo, tier=args.tier, kernels=args.engine_kernels, noise=args.engine_noise,
                                 logs_dir=cache_file().parent / "calibration" / stamp, models_file=args.models_file,
                                 commit=args.commit, log=lambda line: print(line, flush=True))
        except NoPinnedRelease as e:
            print(f"calibrate: {e}", file=sys.stderr)
            return ExitStatus.USAGE
    if args.print_toml:
        isa = host.host.get("isa", [])
        wanted = {(m, actual_path(p, isa)) for m, paths in needs.items() for p in paths}
        for profile in all_profiles():
            if (profile.model, profile.path) in wanted and same_kind(profile.host, predicted):
                print(profile.to_toml())
    return ExitStatus.FINDINGS if any(o.refused for o in outcomes) else ExitStatus.OK


def predicted_host(tier: str, interpreter: EngineInterpreter) -> str:
    """This machine's host kind before any engine runs: on the CPU tier the
    kernel library its features choose, on the GPU tier the run's first
    GPU (its attention backend is known once an engine runs)."""
    if tier == "cpu":
        return host_kind("cpu", interpreter.host)
    with Nvml() as nvml:
        first = run_devices(count=nvml.device_count)[0]
        return host_kind("gpu", {"device": nvml.name(first), "capability": nvml.capability(first)} | interpreter.host)
