"""pytest plugin: the model matrix and the engine's interpreter.

- Options: `--tier`, `--models-file`, `--model`, `--zoo`, `--engine-python`,
  `--engine-kernels`, `--engine-noise`, `--engine-batch-invariant`, checked
  at configure time, before any engine starts.
- `model_entry`: parametrized over the tier's selected entries (filter with
  `@pytest.mark.modality("audio")`, `quantized`, `lora`, `fuzz`, `soak`, `cache`, `aborts`), module scope so a
  family shares engines.
- Fixtures `engine_interpreter` and `model_paths` (tiny builds made by the
  engine's own interpreter).
- Hooks: `pytest_mmharness_engine_interpreter`, `pytest_mmharness_models`.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest

from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError
from harness.engines.venvs import venv_metadata
from harness.models import FAMILY_FLAGS, ZOO_REACH, ModelEntry, ModelMatrixError, models_for
from harness.setup.cpu_features import LEVEL_NAMES, NATIVE


@dataclass(frozen=True)
class Matrix:
    """This plugin's one state: the engine's interpreter and the selected entries."""
    interpreter: EngineInterpreter
    models: list[ModelEntry]


MATRIX = pytest.StashKey[Matrix]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness models")
    g.addoption("--tier", choices=("cpu", "gpu"), default="cpu",
                help="model matrix tier: cpu (tiny offline builds) or gpu (hub checkpoints)")
    g.addoption("--models-file", default=None,
                help="model matrix TOML (default: models.toml at the repo root)")
    g.addoption("--model", action="append", default=[], metavar="NAME",
                help="run only this matrix entry, by its exact name (repeatable; the way to run "
                     "an `optional` entry); -k matches substrings, so -k tiny-gemma4 also selects "
                     "tiny-gemma4-awq")
    g.addoption("--zoo", choices=ZOO_REACH, default="full",
                help="the model zoo's entries to run: full (every one; the nightly) or sample (those marked "
                     "zoo = \"sample\", as `make run` does); entries outside the zoo always run, "
                     "and --model runs what it names")
    g.addoption("--engine-python", default=None,
                help="interpreter (or venv) that runs the engine; default: the harness's own")
    g.addoption("--engine-kernels", choices=LEVEL_NAMES, default=NATIVE,
                help="CPU tier: every engine process behaves as a host of no more than this level "
                     "(its kernel library and AMX/AVX-512 paths); emulated, and only downwards "
                     "(preflight refuses a level above this CPU's)")
    g.addoption("--engine-noise", type=float, default=0.0, metavar="S",
                help="every engine's forward pass moves by S standard deviations of each row-parallel "
                     "layer's output, drawn from the batch's shape: a noisy host (as AMX is) on any "
                     "machine, its own host kind for the noise profiles (harness/compat/site/mmharness_noise.py)")
    g.addoption("--engine-batch-invariant", action="store_true",
                help="GPU tier: every engine in vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1), so one "
                     "stack's answers compare exactly; the records say which mode judged")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "modality(name): run only for models with this modality")
    config.addinivalue_line("markers", "quantized: run only for the tier's quantized tiny builds")
    config.addinivalue_line("markers", "lora: run only for entries with a `lora` table in the matrix")
    for flag in FAMILY_FLAGS:
        config.addinivalue_line("markers", f"{flag}: run only for entries with `{flag} = true` in the matrix")
    tier = config.getoption("tier")
    try:
        config.stash[MATRIX] = Matrix(
            EngineInterpreter(config.getoption("engine_python"), tier, kernels=config.getoption("engine_kernels"),
                              noise=config.getoption("engine_noise"),
                              batch_invariant=config.getoption("engine_batch_invariant")),
            _selected(models_for(tier, config.getoption("models_file")), config.getoption("model"), tier,
                      config.getoption("zoo")))
    except (EngineInterpreterError, ModelMatrixError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None


def pytest_mmharness_engine_interpreter(config: pytest.Config) -> EngineInterpreter:
    return config.stash[MATRIX].interpreter


def pytest_mmharness_models(config: pytest.Config) -> list[ModelEntry]:
    return config.stash[MATRIX].models


def _selected(entries: list[ModelEntry], names: list[str], tier: str, zoo: str = "full") -> list[ModelEntry]:
    unknown = sorted(set(names) - {e.name for e in entries})
    if unknown:
        raise ValueError(f"--model: no {tier}-tier entry named {unknown}; known: {[e.name for e in entries]}")
    if names:
        return [e for e in entries if e.name in names]
    return [e for e in entries if not e.optional and (zoo == "full" or e.zoo != "full")]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model_entry" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("modality")
    quantized = metafunc.definition.get_closest_marker("quantized") is not None
    lora = metafunc.definition.get_closest_marker("lora") is not None
    flags = [f for f in FAMILY_FLAGS if metafunc.definition.get_closest_marker(f) is not None]
    entries = [e for e in metafunc.config.stash[MATRIX].models if (marker is None or e.has(marker.args[0]))
               and (e.quantized or not quantized) and (e.lora is not None or not lora)
               and all(getattr(e, f) for f in flags)]
    metafunc.parametrize("model_entry", entries, ids=[e.name for e in entries], scope="module")


class EngineInterpreterShortfall(UserWarning):
    """The engine's interpreter lacks a package some scenarios need; says what to install."""


@pytest.fixture(scope="session")
def engine_interpreter(pytestconfig) -> EngineInterpreter:
    interpreter = pytestconfig.stash[MATRIX].interpreter
    for note in interpreter.shortfalls:  # what it lacks that the harness cannot supply
        warnings.warn(EngineInterpreterShortfall(note))
    # The engine venv's day and what it resolved, whether or not an engine starts.
    pytestconfig.hook.pytest_mmharness_run_metadata(config=pytestconfig, fields=venv_metadata(interpreter.python))
    return interpreter


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
