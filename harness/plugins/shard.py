"""pytest plugin: `--shard I/N` runs one of N shards whose wall times come
out even (harness/schedule/shards.py), planned from the last known durations in
--history.

The other shards' checks are deselected (pytest reports them so), after
-k, -m and --deselect have chosen the selection, and before the engines
plugin notes each group's last check. Every shard plans from the same
history: a shard's own history line is added by `python -m harness report
merge`, not at its end, so shards run one after another on one machine
still share one plan. The shard, with the plan's fingerprint, goes in the
run's metadata; `report merge` joins only shards of one plan.
"""
from __future__ import annotations

import dataclasses

import pytest

from harness.plugins.common import history_path
from harness.schedule.retirement import engine_group_key
from harness.results.history import last_durations, read_history
from harness.schedule.shards import Group, Shard, ShardSpec, parse_shard, plan_fingerprint, plan_shards

@dataclasses.dataclass
class Sharding:
    """This plugin's one state: the shard asked for, its part of the plan,
    and how many checks the selection held, all shards together (on the
    xdist controller, which collects nothing, as its workers tell it)."""
    spec: ShardSpec
    mine: Shard | None = None
    selected: int = 0


SHARDING = pytest.StashKey[Sharding]()
WORKEROUTPUT_SELECTED = "mmharness_shard_selected"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness").addoption(
        "--shard", default=None, metavar="I/N",
        help="run shard I of N (1-based): module x model groups packed longest first from the "
             "durations in --history, so shards take about as long; a group is never split")


def pytest_configure(config: pytest.Config) -> None:
    value = config.getoption("shard", None)
    if value is None:
        return
    try:
        config.stash[SHARDING] = Sharding(parse_shard(value))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def groups_of(items: list[pytest.Item]) -> list[Group]:
    by_key: dict[str, list[str]] = {}
    for item in items:
        by_key.setdefault(engine_group_key(item), []).append(item.nodeid)
    return [Group(key, tuple(checks)) for key, checks in by_key.items()]


# trylast: after pytest's own -k/-m/--deselect, so the selection is what is
# balanced (the engines plugin notes each group's last check once collection
# is finished, so the two need no order between them).
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    sharding = config.stash.get(SHARDING, None)
    if sharding is None:
        return
    spec = sharding.spec
    history = read_history(history_path(config))
    durations = last_durations(history.entries, config.getoption("tier", None))
    groups = groups_of(items)
    shard = plan_shards(groups, durations, spec.count)[spec.index - 1]
    mine = set(shard.checks)
    kept = [item for item in items if item.nodeid in mine]
    dropped = [item for item in items if item.nodeid not in mine]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    sharding.mine, sharding.selected = shard, len(items) + len(dropped)
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKEROUTPUT_SELECTED] = sharding.selected
    if not config.option.collectonly:
        config.hook.pytest_mmharness_run_metadata(config=config, fields={"shard": {
            "index": spec.index, "count": spec.count, "plan": plan_fingerprint(groups, durations, spec.count),
            "checks": len(kept), "estimated_s": round(shard.estimated_s, 1),
            "history": str(history_path(config))}})


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    sharding = config.stash.get(SHARDING, None)
    if sharding is None or sharding.mine is None:
        return None
    shard = sharding.mine
    return (f"shard {sharding.spec}: {len(shard.checks)} of {sharding.selected} checks in {len(shard.groups)} "
            f"groups, about {shard.estimated_s:.0f} s by {history_path(config)}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    selected = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_SELECTED)
    sharding = node.config.stash.get(SHARDING, None)
    if selected and sharding is not None:
        sharding.selected = selected


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    result = yield
    # A shard the plan left empty did its part: not "no tests collected",
    # when other shards have checks to run.
    sharding = session.config.stash.get(SHARDING, None)
    if sharding is not None and sharding.selected and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
    return result
