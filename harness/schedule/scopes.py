"""The units pytest-xdist hands a worker in a scenario run (`--dist
loadscope`): a module's checks of one model, not the whole module. A
module's engines are one model's at a time and are retired at that model's
last check (harness.schedule.retirement), so its models need not share a
worker, and a family run on many models (the audio zoo) spreads over the
workers instead of filling one. A check of no model stays with its module.
"""
from __future__ import annotations

from collections.abc import Sequence

from xdist.scheduler import LoadScopeScheduling


def model_scope(nodeid: str, models: Sequence[str]) -> str:
    """`module::model` for a check whose parameters name one of `models`
    (the longest that fits: tiny-gemma4-conformer, not tiny-gemma4), else
    the module."""
    module = nodeid.split("::", 1)[0]
    if "[" not in nodeid:
        return module
    params = f"-{nodeid[nodeid.index('[') + 1:nodeid.rindex(']')]}-"
    named = [m for m in models if f"-{m}-" in params]
    return f"{module}::{max(named, key=len)}" if named else module


class ModelScopeScheduling(LoadScopeScheduling):
    """pytest-xdist's loadscope, each scope a module's checks of one model."""

    def __init__(self, config, log=None, *, models: Sequence[str]):
        super().__init__(config, log)
        self.models = tuple(models)

    def _split_scope(self, nodeid: str) -> str:
        return model_scope(nodeid, self.models)
