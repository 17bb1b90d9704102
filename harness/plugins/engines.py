"""pytest plugin: engines and the scenario runner.

- Options: `--engine-url`, and for the harness's own mutation tests
  `--inject-faults`, `--fault-once` and `--fault-scale`, checked at
  configure time.
- Fixtures: `engine_pool` (the run's engines; each one's teardown is a check
  of its own, sent through `pytest_mmharness_add_record`), `runner` (a
  scenario family's Runner for one model, harness.runner) and `check` (a
  check's hand on its own record, harness.runner.check).
- Starts ahead: whenever a runner opens an engine, the next engine its
  module declares (`ENGINES`, harness.runner.declared) that the remaining
  checks need starts ahead (harness.schedule.ahead).
- Retirement: each module's checks run grouped by model, and a module's (or
  a model's) engines are retired after its last check, noted once the
  collection is final.
- A check's record gets the engine facts of every run the check read
  (harness.runner.facts), through `pytest_mmharness_record`.
- A failed check's rerun (the reruns plugin) retires the engines its
  failed attempt's runs used, through the pool, so the rerun starts new ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.engines.faults import FAULT_NAMES, fault_env
from harness.engines.kernels import kernel_metadata, require_predicted_kernels
from harness.engines.offline import remove_stale_socket_dirs
from harness.engines.placement import Unplaced
from harness.engines.pool import EnginePool
from harness.engines.procs import reap_stale
from harness.engines.teardown import teardown_record
from harness.memory.samplers import Sampler
from harness.models import tier_settings
from harness.schedule import retirement
from harness.schedule.ahead import next_ahead
from harness.schedule.scopes import ModelScopeScheduling
from harness.schedule.placement import run_placement
from harness.plugins.common import (history_path, is_check, is_controller, model_entry_of, numeric_paths_of,
                                     worker_count, worker_id)
from harness.results.history import last_durations, read_history
from harness.results.record import CheckRecord
from harness.results.starts import append_start
from harness.results.store import RunLayout
from harness.runner import Runner
from harness.runner.check import Check
from harness.runner.declared import SAME, module_engines
from harness.runner.facts import attach_runs
from harness.runner.run import engine_uses
from harness.schedule.shards import module_order

# On Ctrl-C engines get this long to stop before they are killed.
INTERRUPT_GRACE_S = 1.0


@dataclass
class Engines:
    """This plugin's one state: the faults switched on, the remote server if
    any, the run's pool, each group's last check, the pool's hand-out
    count when the module now running began, and the check now running."""
    fault_env: dict
    engine_url: str | None
    pool: EnginePool | None = None
    last_checks: dict[str, retirement.LastCheck] = field(default_factory=dict)
    module_mark: int = 0
    # The check now running: the engines started ahead serve the checks from it on.
    item: pytest.Item | None = None
    # Each module's runner of each model, and the module's declared engines:
    # what resolves the engines its later checks need.
    runners: dict[tuple[str, str], tuple[Runner, tuple]] = field(default_factory=dict)


ENGINES = pytest.StashKey[Engines]()
# Per check: its hand on its record (which knows the runs it read), and its
# call phase on the samplers' clock, so the report can mark it on the timeline.
CHECK = pytest.StashKey[Check]()
CALL_SPAN = pytest.StashKey[tuple[float, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness engines")
    g.addoption("--engine-url", default=None,
                help="run server-kind scenarios against this already running OpenAI-compatible server")
    g.addoption("--inject-faults", default="",
                help="for the harness's own mutation tests: switch these faults on inside every engine "
                     f"(comma-separated: {', '.join(FAULT_NAMES)})")
    g.addoption("--stall-seconds", type=float, default=None,
                help="the stall bound: a request in flight with no observed progress for this long is "
                     "a hang (default: the tier's stall_s in models.toml [tiers.<tier>])")
    g.addoption("--fault-once", default="",
                help="for the harness's own tests of the flaky verdict: these of --inject-faults act in the "
                     "first engine they change something in only (a marker under the run directory), so a "
                     "failed check's rerun on fresh engines meets them no more (comma-separated)")
    g.addoption("--fault-scale", type=float, default=None,
                help="for the harness's own mutation tests: the injected leaks' size, in standard "
                     "deviations of the embedding they perturb (default 1)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alone: the module's engines have the machine to themselves on the CPU "
                                       "tier (no other worker's engine computes beside them): for timings")
    if config.getoption("engine_url") and is_controller(config) and int(config.option.numprocesses) > 1:
        raise pytest.UsageError("--engine-url: one server serves every check, so its checks run in one "
                                "process (-n 0; make run: RUN_WORKERS=0)")
    try:
        faults = [f for f in config.getoption("inject_faults").split(",") if f]
        once = tuple(f for f in config.getoption("fault_once").split(",") if f)
        markers = Path(config.hook.pytest_mmharness_run_dir(config=config)) / "fault-markers" if once else None
        env = fault_env(*faults, scale=config.getoption("fault_scale"), once=once, markers=markers) \
            if faults or once else {}
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[ENGINES] = Engines(env, config.getoption("engine_url"))


# --- fixtures --------------------------------------------------------------------

@pytest.fixture(scope="session")
def engine_pool(pytestconfig, engine_interpreter):
    state = pytestconfig.stash[ENGINES]
    reap_stale()
    remove_stale_socket_dirs()
    run_dir = Path(pytestconfig.hook.pytest_mmharness_run_dir(config=pytestconfig))
    # The ledger is the run's, shared by its xdist workers: GPUs on the GPU
    # tier, the engine turn on the CPU tier, a slot per worker up to one per
    # core (harness.schedule.placement).
    stall_s = pytestconfig.getoption("stall_seconds") or tier_settings(
        engine_interpreter.tier, pytestconfig.getoption("models_file")).stall_s
    pool = EnginePool(engine_interpreter, RunLayout(run_dir).engines_dir, stall_s=stall_s,
                      placement=Unplaced() if state.engine_url else run_placement(
                          run_dir, engine_interpreter.tier, worker_count(pytestconfig)),
                      log_prefix="" if (worker := worker_id(pytestconfig)) == "main" else f"{worker}-")
    pool.on_start = lambda start: pytestconfig.hook.pytest_mmharness_engine_start(config=pytestconfig, start=start)
    # The share of the run the engine starts took is over every worker's time.
    pytestconfig.hook.pytest_mmharness_run_metadata(config=pytestconfig,
                                                    fields={"workers": worker_count(pytestconfig)})
    state.pool = pool
    yield pool
    pool.close_all()
    for entry in pool.retired:
        pytestconfig.hook.pytest_mmharness_add_record(config=pytestconfig, record=teardown_record(entry))


@pytest.fixture(scope="module")
def runner(request, pytestconfig, model_entry, engine_pool, model_paths) -> Runner:
    """The family's runner for this model; scenarios are named after the module.
    Its engines are retired after the module's last check of this model
    (see pytest_runtest_teardown)."""
    state = pytestconfig.stash[ENGINES]
    # CPU tier: a module marked `alone` has the machine to itself (every slot of the engine turn).
    engine_pool.placement.alone = request.node.get_closest_marker("alone") is not None

    def on_engine(engine) -> None:
        ident = engine.identity
        pytestconfig.hook.pytest_mmharness_run_metadata(config=pytestconfig, fields={
            "engine": ident.get("distribution"), "engine_version": ident.get("version"),
            "torch": ident.get("torch"), "device": ident.get("device"),
            "engine_python": ident.get("python"), "engine_host_kind": ident.get("host_kind")}
            | kernel_metadata(ident))
        require_predicted_kernels(engine)

    declared = module_engines(request.module)
    made = Runner(model_entry, model_paths(model_entry), request.node.name.removesuffix(".py"),
                  engine_pool, remote_url=state.engine_url, env=state.fault_env, on_engine=on_engine,
                  on_open=lambda spec, call_args: _start_next_ahead(state, made, declared, spec, call_args))
    state.runners[(request.node.nodeid, model_entry.name)] = (made, declared)
    return made


def _resolver(runner: Runner, call_args: dict | None = None):
    """A declared engine's spec for a check's parameters, SAME taking the
    opening call's arguments (retirement never asks for a SAME engine)."""
    def resolve(engine, params: dict):
        args = call_args if engine.args is SAME else engine.args(runner, params) if engine.args else None
        return runner.spec_of(engine.kind, args)
    return resolve


def _start_next_ahead(state: Engines, runner: Runner, declared: tuple, opening, call_args: dict | None) -> None:
    """An engine of the module is about to be opened: the next one its
    remaining checks of this model need starts ahead, beside it, where no
    other start ahead is under way (harness.schedule.ahead)."""
    pool, item = state.pool, state.item
    if not declared or pool is None or item is None or pool.starting_ahead():
        return

    spec = next_ahead(declared, retirement.remaining(item.session.items, item), _resolver(runner, call_args),
                      busy=lambda key: key == opening.key or pool.holds(key))
    if spec is not None:
        pool.start_ahead(spec, label=f"{runner.family}[{runner.entry.name}-ahead]")


@pytest.fixture
def check(request, check_record) -> Check:
    """This check's hand on its own record."""
    made = request.node.stash[CHECK] = Check(check_record, paths=numeric_paths_of(request.node))
    return made


# --- what each xdist worker is handed ----------------------------------------

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """A scenario run's `--dist loadscope`: each unit a module's checks of one
    model (harness.schedule.scopes), so a family's models spread over the
    workers. Any other distribution is xdist's own."""
    if config.getvalue("dist") != "loadscope":
        return None
    models = [entry.name for entry in config.hook.pytest_mmharness_models(config=config)]
    return ModelScopeScheduling(config, log, models=models)


# --- retiring engines no later check needs ----------------------------------

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Within each module, run one model's checks together (otherwise in the
    order pytest chose). On xdist workers (`make run`: --dist loadscope
    --no-loadscope-reorder, a module per work unit), the modules longest
    first by the history's durations, those marked `alone` last: an `alone`
    module waits for the other workers' modules to end and keeps them
    waiting while it runs, so it goes where little else is left."""
    items[:] = retirement.group_by_model(items)
    if worker_count(config) > 1 and items and all(is_check(item) for item in items):  # (not make test's tests)
        modules: dict[str, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(item.nodeid.split("::")[0], []).append(item)
        durations = last_durations(read_history(history_path(config)).entries, config.getoption("tier", None))
        alone = {m for m, its in modules.items() if its[0].get_closest_marker("alone")}
        order = module_order({m: tuple(i.nodeid for i in its) for m, its in modules.items()}, durations, alone)
        items[:] = [item for m in order for item in modules[m]]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once every plugin has deselected what it would (-k, -m, a shard), note
    each module's and each model's last check: after it, their engines are
    retired, so one model's engines are in memory at a time instead of every
    engine of the run."""
    state = session.config.stash[ENGINES]
    state.last_checks, state.module_mark = retirement.last_checks(session.items), 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    state = item.config.stash[ENGINES]
    state.item = item
    try:
        return (yield)
    finally:
        state.item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    try:
        return (yield)  # the module's fixtures are finalized first
    finally:
        _retire_after(item)


def _retire_after(item: pytest.Item) -> None:
    state = item.config.stash[ENGINES]
    ends = state.last_checks.get(item.nodeid)
    if state.pool is None or ends is None:
        return
    if ends.module:
        module = item.nodeid.split("::", 1)[0]
        state.runners = {key: opened for key, opened in state.runners.items() if key[0] != module}
        state.pool.drop_ahead()
        state.pool.release_since(state.module_mark)
        state.module_mark = state.pool.mark()
    elif ends.model:
        state.pool.release_since(state.module_mark, name=ends.model, keep=_kept(state, item, ends.model))


def _kept(state: Engines, item: pytest.Item, model: str) -> set[str]:
    """The engines of this group that a later group of the module's checks
    of the model declares it uses (harness.schedule.retirement.still_needed)."""
    opened = state.runners.get((item.nodeid.split("::", 1)[0], model))
    if opened is None:
        return set()
    runner, declared = opened
    later = retirement.remaining(item.session.items, item)[1:]
    return retirement.still_needed(declared, later, _resolver(runner))


def pytest_mmharness_rerun(item: pytest.Item, cause: str, held: list) -> None:
    """A failed check runs again on fresh engines: the engines of the runs
    it read and of the fixtures computed again are retired now, and new
    ones of the same specs start ahead, side by side (CPU tier), for their
    runner to take over."""
    state = item.config.stash[ENGINES]
    check = item.stash.get(CHECK, None)
    if state.pool is None:
        return
    uses = engine_uses([*(check.runs if check else []), *held])
    handles = [use.handle for use in uses if use.handle is not None]
    state.pool.retire(handles)
    for spec in {h.spec.key: h.spec for h in handles if h.spec is not None}.values():
        state.pool.start_ahead(spec, label=f"{item.name} (rerun)")


def pytest_mmharness_engine_start(config: pytest.Config, start) -> None:
    """Each start that ended, counted in the run (harness.results.starts)."""
    if start.seconds is not None:
        layout = RunLayout(Path(config.hook.pytest_mmharness_run_dir(config=config)))
        append_start(layout.engine_starts, {"worker": worker_id(config), "kind": start.kind, "name": start.name,
                                            "log": start.log.name, "seconds": round(start.seconds, 2),
                                            "outcome": start.outcome, "ahead": start.ahead,
                                            "waited_s": round(start.waited_s, 2)})


# --- a check's runs onto its record ----------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    started = Sampler.now()
    try:
        return (yield)
    finally:
        item.stash[CALL_SPAN] = (started, Sampler.now())


def pytest_mmharness_record(record: CheckRecord, item: pytest.Item | None) -> None:
    if item is None:
        return
    if (entry := model_entry_of(item)) is not None:
        record.model = entry.name
    check = item.stash.get(CHECK, None)
    if check is not None and check.runs:
        run_dir = Path(item.config.hook.pytest_mmharness_run_dir(config=item.config))
        attach_runs(record, check.runs, run_dir, item.stash.get(CALL_SPAN, None))


# --- teardown -----------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Before session fixtures are torn down: on Ctrl-C, engines stop at once
    and no leak check waits for memory to come back."""
    state = session.config.stash.get(ENGINES, None)
    if state is not None and state.pool is not None and exitstatus == pytest.ExitCode.INTERRUPTED:
        state.pool.interrupted(grace=INTERRUPT_GRACE_S)
