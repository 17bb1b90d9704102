"""pytest fixtures that give scenarios engines and models.

- `model_entry`: parametrized over the tier's model matrix (filter with
  `@pytest.mark.modality("audio")`), module scope so a family shares engines.
- `engine_for(kind, entry, **engine_arg_overrides)`: a ready engine from the
  session's pool; the scenario's log slice, engine identity and any crash are
  attached to its record when it ends.
Bad options (a missing --engine-python, a broken model matrix) stop the run
before any engine starts.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError
from harness.engines.pool import EnginePool
from harness.engines.procs import reap_stale
from harness.engines.results import EngineStartupFailed
from harness.models import ModelEntry, ModelMatrixError, models_for
from harness.results.pytest_plugin import SESSION, set_run_metadata
from harness.verdicts import CheckFailure

INTERPRETER = pytest.StashKey[EngineInterpreter]()
MODELS = pytest.StashKey[list[ModelEntry]]()


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
    run_dir = pytestconfig.stash[SESSION].layout.run_dir
    pool = EnginePool(engine_interpreter, run_dir / "engines",
                      remote_url=pytestconfig.getoption("engine_url"))
    yield pool
    survivors = pool.close_all()
    leftover = {log: pids for log, pids in survivors.items() if pids}
    assert not leftover, f"engine processes survived teardown: {leftover}"


def _slug(nodeid: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[-120:]


@pytest.fixture
def engine_for(request, pytestconfig, engine_pool, model_paths, check_record):
    used = []

    def get(kind: str, entry: ModelEntry, **overrides):
        if pytestconfig.getoption("engine_url") and kind != "server":
            pytest.skip(f"{kind} engine: --engine-url targets a remote server, "
                        "so only server-kind scenarios run")
        args = {**entry.engine_args, **overrides}
        try:
            engine = engine_pool.get(kind, model_paths(entry), args, scenario=request.node.nodeid,
                                     name=entry.name, env=entry.env)
        except EngineStartupFailed as e:
            raise CheckFailure(e.crash.cause, f"{kind} engine for {entry.name} did not start: "
                               f"{e.crash.detail}", evidence={"crash": e.crash.to_dict()}) from None
        used.append((engine, engine.mark()))
        ident = engine.identity
        check_record.model = entry.name
        check_record.engine = f"{kind}:{ident.get('distribution')}"
        check_record.engine_version = ident.get("version")
        set_run_metadata(pytestconfig, engine=ident.get("distribution"),
                         engine_version=ident.get("version"), torch=ident.get("torch"),
                         device=ident.get("device"), engine_python=ident.get("python"))
        return engine

    yield get
    run_dir = pytestconfig.stash[SESSION].layout.run_dir
    for i, (engine, window) in enumerate(used):
        if engine.log_path:
            out = run_dir / "logs" / f"{_slug(request.node.nodeid)}-{i}.log"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(engine.log_since(window))
            check_record.log_path = str(out)
        check_record.evidence.setdefault("engine_window", {"started": window.started})
        if engine.crashed:
            engine_pool.note_crash(engine, request.node.nodeid)
            check_record.evidence.setdefault("crash", engine.crashed.to_dict() |
                                             {"log_tail": engine.crashed.log_tail[-40:]})
