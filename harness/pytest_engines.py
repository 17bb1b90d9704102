"""pytest fixtures that give scenarios engines and models.

- `model_entry`: parametrized over the tier's model matrix (filter with
  `@pytest.mark.modality("audio")`), module scope so a family shares engines.
- `open_engine(kind, entry, scenario, **engine_arg_overrides)`: an
  EngineSession from the session's pool, for module-scoped workload runs.
  A start-up failure does not raise there: each check that needs the engine
  fails with the start-up cause when it calls `session.require()`.
Every check that used an engine gets the engine's identity, its log slice and
any crash attached to its record (`EngineSession.attach`).
Bad options (a missing --engine-python, a broken model matrix) stop the run
before any engine starts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.engines.base import Engine, LogWindow
from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError
from harness.engines.pool import EnginePool
from harness.engines.procs import reap_stale
from harness.engines.results import EngineStartupFailed
from harness.models import ModelEntry, ModelMatrixError, models_for
from harness.memory_watch import MemoryWatch
from harness.plugins.records import RECORD
from harness.plugins.run import run_layout
from harness.results.record import MEMORY_TIMELINE_POINTS, CheckRecord
from harness.verdicts import Cause, CheckFailure, Verdict

INTERPRETER = pytest.StashKey[EngineInterpreter]()
MODELS = pytest.StashKey[list[ModelEntry]]()
# Sessions a check's record was attached to, refreshed when the check ends so
# its log slice and memory window cover what the check itself ran.
_ATTACHED: dict[int, list["EngineSession"]] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "modality(name): run only for models with this modality")
    tier = config.getoption("tier")
    try:
        config.stash[INTERPRETER] = EngineInterpreter(config.getoption("engine_python"), tier)
        config.stash[MODELS] = models_for(tier, config.getoption("models_file"))
    except (EngineInterpreterError, ModelMatrixError) as e:
        raise pytest.UsageError(str(e)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model_entry" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("modality")
    entries = [e for e in metafunc.config.stash[MODELS] if marker is None or e.has(marker.args[0])]
    metafunc.parametrize("model_entry", entries, ids=[e.name for e in entries], scope="module")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[-120:]


@dataclass
class EngineSession:
    """One scenario's use of a (possibly shared) engine."""
    kind: str
    entry: ModelEntry
    scenario: str
    model: str
    engine: Engine | None = None
    window: LogWindow | None = None
    failure: CheckFailure | None = None
    pool: EnginePool | None = None
    run_dir: Path | None = None
    watch: MemoryWatch | None = None
    t0: float = 0.0  # the sampler's clock when the scenario began
    _log_copy: Path | None = field(default=None, repr=False)

    def require(self) -> Engine:
        if self.failure:
            raise self.failure
        return self.engine

    def attach(self, record) -> None:
        """Identity, log slice, memory and any crash onto a check's record."""
        sessions = _ATTACHED.setdefault(id(record), [])
        if self not in sessions:
            sessions.append(self)
        record.model = self.entry.name
        if self.engine is None:
            record.engine = self.kind
            return
        ident = self.engine.identity
        record.engine = f"{self.engine.kind}:{ident.get('distribution')}"
        record.engine_version = ident.get("version")
        if self.engine.log_path and self.window:
            if self._log_copy is None:
                self._log_copy = self.run_dir / "logs" / f"{_slug(self.scenario)}.log"
                self._log_copy.parent.mkdir(parents=True, exist_ok=True)
            # Rewritten per check: the slice grows while the scenario runs.
            self._log_copy.write_text(self.engine.log_since(self.window))
            record.log_path = str(self._log_copy)
        self._attach_memory(record)
        if self.engine.crashed:
            self.pool.note_crash(self.engine, self.scenario)
            record.evidence.setdefault("crash", self.engine.crashed.to_dict() |
                                       {"log_tail": self.engine.crashed.log_tail[-40:]})


    def _attach_memory(self, record) -> None:
        window = self.watch.window(self.t0) if self.watch else None
        if window is None or not window.timeline:
            return
        record.peak_memory = window.peak
        path = self.run_dir / "timelines" / f"{_slug(self.scenario)}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        window.write_csv(path)
        record.timeline_path = str(path)
        record.memory_timeline = window.to_dict(max_points=MEMORY_TIMELINE_POINTS)["timeline"]
        record.evidence["sampler"] = {"achieved_hz": round(window.achieved_hz, 1),
                                      "notes": window.notes}


@pytest.fixture(autouse=True)
def _refresh_engine_attachments(request):
    yield
    record = request.node.stash.get(RECORD, None)
    for session in _ATTACHED.pop(id(record), []) if record is not None else []:
        session.attach(record)
    _ATTACHED.pop(id(record), None)


@pytest.fixture(scope="session")
def engine_interpreter(pytestconfig) -> EngineInterpreter:
    return pytestconfig.stash[INTERPRETER]


@pytest.fixture(scope="session")
def model_paths(engine_interpreter):
    """Model id or directory per matrix entry; tiny builds by the engine's interpreter."""
    cache: dict[str, str] = {}

    def path_for(entry: ModelEntry) -> str:
        if entry.name not in cache:
            arch = entry.tiny_arch
            cache[entry.name] = str(engine_interpreter.build_tiny_model(arch)) if arch else entry.model
        return cache[entry.name]
    return path_for


@pytest.fixture(scope="session")
def engine_pool(pytestconfig, engine_interpreter):
    reap_stale()
    run_dir = run_layout(pytestconfig).run_dir
    pool = EnginePool(engine_interpreter, run_dir / "engines",
                      remote_url=pytestconfig.getoption("engine_url"))
    yield pool
    pool.close_all()
    for entry in pool.retired:
        _write_teardown_check(pytestconfig, entry)


def _write_teardown_check(config, entry) -> None:
    """One record per engine: it was torn down, nothing of it survived, and
    memory came back (host available memory, or GPU used memory)."""
    engine = entry.engine
    record = CheckRecord(id=f"engine_teardown::{Path(str(engine.log_path or engine.name)).stem}",
                         family="engine_teardown", model=engine.name,
                         engine=f"{engine.kind}:{engine.identity.get('distribution')}",
                         engine_version=engine.identity.get("version"),
                         log_path=str(engine.log_path) if engine.log_path else None,
                         params={"served": entry.served, "crashed_in": entry.crashed_in})
    failure = entry.teardown if isinstance(entry.teardown, CheckFailure) else None
    if entry.survivors:
        failure = CheckFailure(Cause.LEAK, f"engine processes survived teardown: {entry.survivors}",
                               evidence={"survivors": entry.survivors, "scenarios": entry.served})
    if failure:
        record.verdict, record.cause, record.message = Verdict.FAIL.value, failure.cause, failure.message
        record.evidence.update(failure.evidence)
    else:
        record.verdict = Verdict.PASS.value if entry.teardown is not None else Verdict.SKIP.value
        record.message = "" if entry.teardown is not None else "no memory watch on this engine"
        if entry.teardown is not None:
            record.evidence.update(entry.teardown.evidence())
    if entry.watch and entry.watch.result:
        record.peak_memory = entry.watch.result.peak
    config.hook.pytest_mmharness_add_record(config=config, record=record)


@pytest.fixture(scope="session")
def open_engine(pytestconfig, engine_pool, model_paths):
    run_dir = run_layout(pytestconfig).run_dir

    def open_(kind: str, entry: ModelEntry, scenario: str, **overrides) -> EngineSession:
        if pytestconfig.getoption("engine_url") and kind != "server":
            pytest.skip(f"{kind} engine: --engine-url targets a remote server, "
                        "so only server-kind scenarios run")
        args = {**entry.engine_args, **overrides}
        s = EngineSession(kind, entry, scenario, model_paths(entry), pool=engine_pool, run_dir=run_dir)
        try:
            s.engine = engine_pool.get(kind, s.model, args, scenario=scenario, name=entry.name,
                                       env=entry.env)
        except EngineStartupFailed as e:
            s.failure = CheckFailure(e.crash.cause, f"{kind} engine for {entry.name} did not start: "
                                     f"{e.crash.detail}", evidence={"crash": e.crash.to_dict()})
            return s
        s.window = s.engine.mark()
        s.watch = engine_pool.watch_of(s.engine)
        s.t0 = s.watch.now() if s.watch else 0.0
        ident = s.engine.identity
        pytestconfig.hook.pytest_mmharness_run_metadata(config=pytestconfig, fields=dict(
            engine=ident.get("distribution"), engine_version=ident.get("version"),
            torch=ident.get("torch"), device=ident.get("device"), engine_python=ident.get("python")))
        return s
    return open_
