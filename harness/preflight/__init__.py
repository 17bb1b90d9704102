"""Preflight: what a run needs, verified before its first check, so that a
broken set-up fails in seconds with one message instead of hours of failed
engine starts. Each check is a plain function returning the problems it
found, in words a user can act on (an empty list: nothing wrong)."""
from __future__ import annotations

from dataclasses import dataclass

from harness.engines.interpreter import EngineInterpreter
from harness.models import ModelEntry
from harness.preflight.devices import cpu_problems, gpu_problems
from harness.preflight.endpoint import endpoint_problems
from harness.preflight.interpreter import interpreter_problems
from harness.preflight.storage import hub_problems, tiny_cache_problems
from harness.setup.cpu_features import NATIVE


@dataclass(frozen=True)
class Needs:
    """What the selected checks need."""
    tier: str
    entries: tuple[ModelEntry, ...] = ()  # the matrix entries they run on
    engine_url: str | None = None         # the server they run against, if not their own
    starts_engines: bool = False          # the harness starts engines (never with engine_url)
    interpreter: EngineInterpreter | None = None  # the engine's interpreter, where it is used
    families: tuple[str, ...] = ()        # the scenario families (modules) selected; () for any
    kernel_level: str = NATIVE            # --engine-kernels: the CPU level the engines may use


def problems(needs: Needs) -> list[str]:
    """The problems found, each check run only where the selection needs
    it. The instant checks go first; the interpreter's probe (seconds) runs
    only when they found nothing, so a wrong URL or a missing GPU is told
    at once."""
    found: list[str] = []
    if needs.starts_engines:
        found += (gpu_problems(needs.entries, families=needs.families) if needs.tier == "gpu"
                  else cpu_problems(needs.kernel_level))
    if needs.engine_url:
        found += endpoint_problems(needs.engine_url, needs.entries)
    hub = [e for e in needs.entries if e.tiny_arch is None]
    if hub:
        found += hub_problems(hub, download=needs.starts_engines)
    if len(hub) < len(needs.entries):
        found += tiny_cache_problems()
    if needs.interpreter is not None and not found:
        archs = tuple(dict.fromkeys(e.tiny_arch for e in needs.entries if e.tiny_arch))
        found += interpreter_problems(needs.interpreter, gpu=needs.tier == "gpu" and needs.starts_engines,
                                      archs=archs)
    return found
