"""Fixtures for the harness's own tests."""
import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.models import models_for


@pytest.fixture(scope="session")
def interpreter() -> EngineInterpreter:
    return EngineInterpreter()


@pytest.fixture(scope="session")
def tiny_gemma4(interpreter):
    """(model dir, engine args) of the CPU tier's tiny Gemma4."""
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    return interpreter.build_tiny_model("gemma4"), entry.engine_args



@pytest.fixture(scope="module")
def offline_gemma4(tiny_gemma4, interpreter, tmp_path_factory):
    """A started offline engine on the tiny Gemma4, one per test module; its
    teardown must leave no process behind."""
    model, args = tiny_gemma4
    engine = OfflineEngine(model, args, interpreter, tmp_path_factory.mktemp("offline") / "engine.log")
    engine.start()
    yield engine
    assert engine.close() == []
