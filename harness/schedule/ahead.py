"""Starts ahead, planned from the scenario module's declared engines
(harness.runner.declared) and the checks still to run.

On the CPU tier a start is mostly one core's imports, three Python
processes one after another, so a second start beside the first (or beside
a module's requests) costs little wall time. Whenever an engine of a module
is opened (started, or taken over from a start ahead), the engine that the
module's remaining checks of this model need next, and that is neither up
nor on its way, starts ahead; one start ahead at a time, so that a start
never runs beside more than one other on two cores. Only the current
module and model: one model's engines are in memory at a time. Never a TP
engine: its ranks take a core each, so its start would crowd the checks.
"""
from __future__ import annotations

from typing import Callable

import pytest

from harness.engines.parallel import tensor_parallel
from harness.engines.pool import EngineSpec
from harness.runner.declared import Engine
from harness.schedule.retirement import needs, params_of


def next_ahead(declared: tuple[Engine, ...], remaining: list[pytest.Item],
               resolve: Callable[[Engine, dict], EngineSpec | None],
               busy: Callable[[str], bool]) -> EngineSpec | None:
    """The spec to start ahead: of the engines the remaining checks need,
    in the order they need them (and, within a check, of the declarations),
    the first that `resolve` can build for the check's parameters (None:
    not now, say a remote server or a TP size the run cannot host), at TP 1,
    and not `busy` (up, on its way, or the one being opened)."""
    for item in remaining:
        for engine in declared:
            if engine.ahead and needs(engine, item):
                spec = resolve(engine, params_of(item))
                if spec is not None and tensor_parallel(spec.args) == 1 and not busy(spec.key):
                    return spec
    return None
