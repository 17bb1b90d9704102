"""pytest plugin: preflight. Once the checks are collected, and before the
first one runs, verify what the selected checks need (harness.preflight):
the tier's devices, the engine's interpreter, the --engine-url server and
the model it serves, the hub token and disk for the models. Anything
missing stops the run with one message and the usage status (4), as a bad
option does, instead of failing engine start after engine start.

Under xdist only the workers collect: the controller checks what the
options select, before any worker starts. `--collect-only` checks nothing,
so the checks can be listed on any machine.
"""
from __future__ import annotations

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.models import ModelEntry, scenario_families
from harness.plugins.engines import INTERPRETER, MODELS, model_entry_of
from harness.plugins.run import is_worker
from harness.preflight import Needs, problems


def needs_of_items(config: pytest.Config, items: list[pytest.Item]) -> Needs:
    """What these checks need, read from their fixtures: a matrix entry
    (`model_entry`), the engine pool, the engine's interpreter."""
    entries = dict.fromkeys(e for item in items if (e := model_entry_of(item)) is not None)
    uses = {name for item in items for name in getattr(item, "fixturenames", ())}
    families = dict.fromkeys(item.module.__name__.rsplit(".", 1)[-1] for item in items
                             if getattr(item, "module", None) is not None)
    return _needs(config, tuple(entries), "engine_pool" in uses, "engine_interpreter" in uses, tuple(families))


def needs_of_options(config: pytest.Config) -> Needs:
    """Without the items: every entry the options select may run, in any family."""
    return _needs(config, tuple(config.stash[MODELS]), True, True, tuple(scenario_families()))


def _needs(config: pytest.Config, entries: tuple[ModelEntry, ...], pooled: bool, interpreted: bool,
           families: tuple[str, ...]) -> Needs:
    url = config.getoption("engine_url")
    interpreter: EngineInterpreter | None = config.stash[INTERPRETER] if interpreted else None
    return Needs(tier=config.getoption("tier"), entries=entries, engine_url=url,
                 starts_engines=pooled and not url, interpreter=interpreter, families=families)


def stop_if_missing(needs: Needs) -> None:
    found = problems(needs)
    if found:
        raise pytest.UsageError("preflight: this run cannot work here, so no check ran:\n"
                                + "\n".join(f"  - {p}" for p in found))


@pytest.hookimpl(tryfirst=True)  # before any other plugin acts on the collection
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if is_worker(config) or config.option.collectonly:
        return
    stop_if_missing(needs_of_items(config, session.items))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.pluginmanager.has_plugin("dsession") and not config.option.collectonly:  # xdist controller
        stop_if_missing(needs_of_options(config))
