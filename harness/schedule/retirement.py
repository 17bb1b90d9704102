"""Which check is the last to need an engine: the pool cannot see the
future, the collected order can. Engines are named after their model, and a
module's scenarios open engines only through its `runner` (one per model).
A group is a module's checks of one model (and one value of each engine
parameter): `group_of` and `remaining` give the checks still to run in
the current one (what the engines started ahead serve). At a group's end
its engines are retired, but for those that a later group of the module's
checks of the model declares it uses (`still_needed`): a TP size's or a
cache cell's checks that need the TP 1 reference engine of the group
before them keep it instead of starting it again."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest

from harness.runner.declared import SAME, Engine


@dataclass(frozen=True)
class LastCheck:
    """What ends after this check: its module (all engines it opened), or one model in it."""
    module: bool = False
    model: str | None = None


# Module-scoped parameters besides the model whose values need engines of
# their own: a family's TP sizes, the cache matrix's cells. Each value's
# engines are retired when its checks are done, so a TP 2 engine never
# shares memory with TP 1's, nor one cell's server with the next's.
ENGINE_PARAMS = ("tp", "cell")


def model_of(item: pytest.Item) -> str | None:
    entry = getattr(item, "callspec", None) and item.callspec.params.get("model_entry")
    return getattr(entry, "name", None)


def _group(item: pytest.Item) -> tuple:
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    return (model_of(item), *(params.get(p) for p in ENGINE_PARAMS))


def engine_group_key(item: pytest.Item) -> str:
    """The module × model (× engine parameters) an item shares engines with,
    as text: what a shard must never split."""
    model, *params = _group(item)
    return "::".join([item.nodeid.split("::", 1)[0], str(model), *(str(v) for v in params if v is not None)])


def group_by_model(items: list[pytest.Item]) -> list[pytest.Item]:
    """A stable regrouping: each module's checks, its models (and their
    engine parameters) in the order they first appear. A module's checks
    stay together and in their order."""
    modules: dict[str, dict[str | None, list[pytest.Item]]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], {}).setdefault(_group(item), []).append(item)
    return [item for models in modules.values() for group in models.values() for item in group]


def last_checks(items: list[pytest.Item]) -> dict[str, LastCheck]:
    """node id → what ends after it, for the checks after which something ends."""
    ends: dict[str, LastCheck] = {}
    seen: set[tuple] = set()
    modules_seen: set[str] = set()
    for item in reversed(items):
        module, model, group = item.nodeid.split("::", 1)[0], model_of(item), _group(item)
        if module not in modules_seen:
            modules_seen.add(module)
            ends[item.nodeid] = LastCheck(module=True)
        elif model is not None and (module, group) not in seen:
            ends[item.nodeid] = LastCheck(model=model)
        seen.add((module, group))
    return ends


def params_of(item: pytest.Item) -> dict:
    return dict(getattr(item, "callspec", None) and item.callspec.params or {})


def remaining(items: list[pytest.Item], current: pytest.Item) -> list[pytest.Item]:
    """The checks from `current` on of its module's checks of its model,
    in the collected order (after deselection and sharding)."""
    module, model = current.nodeid.split("::", 1)[0], model_of(current)
    start = next((n for n, item in enumerate(items) if item is current), len(items))
    return [item for item in items[start:]
            if item.nodeid.split("::", 1)[0] == module and model_of(item) == model]


def needs(engine: Engine, item: pytest.Item) -> bool:
    """Whether the check uses the engine: it asks for one of its fixtures,
    or is one of its tests."""
    return (any(name in getattr(item, "fixturenames", ()) for name in engine.used_by)
            or getattr(item, "originalname", None) in engine.used_by)


def still_needed(declared: tuple[Engine, ...], later: list[pytest.Item],
                 resolve: Callable[[Engine, dict], object | None]) -> set[str]:
    """The spec keys of the declared engines that the `later` checks use,
    each resolved for the check's parameters (None: it cannot be, say a
    remote server). An engine whose arguments are the opening call's
    (SAME) cannot be known before that call, and is not kept."""
    keys = set()
    for item in later:
        for engine in declared:
            if engine.args is not SAME and needs(engine, item):
                spec = resolve(engine, params_of(item))
                if spec is not None:
                    keys.add(spec.key)
    return keys
