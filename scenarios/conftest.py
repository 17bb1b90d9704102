"""Options only the scenario families read, checked when pytest starts:
a bad value stops the run with one message, before any engine starts."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cache.cells import SELECTIONS as CACHE_CELLS
from harness.workloads import audio
from harness.fuzz.reproducers import read_spec
from harness.fuzz import session as fuzz_session
from harness.fuzz.session import FuzzSession
from harness.models import ROOT
from harness.soak.settings import SOAK_S, SoakSettings, for_tier as soak_for_tier

AUDIO_DURATIONS = pytest.StashKey[list[float]]()
FUZZ_SEED = pytest.StashKey[int]()
REPLAY = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness scenarios")
    g.addoption("--stress", action="store_true", default=False,
                help="also run stress settings (many concurrent requests); on in `make run`")
    g.addoption("--audio-durations", default=None,
                help="clip durations in seconds for the ragged-audio batch of every model (comma-separated, "
                     "at least two, all different, each above 0; default: derived from each model's own "
                     "limits, harness.workloads.audio.ragged_durations)")
    # With 4, the requests of models whose processor pads every clip to a
    # 30 s window (Qwen2.5-Omni, AudioFlamingo3, GLM-ASR) reached the
    # scheduler one at a time on a 2-core EPYC at their first attempt (the
    # served-together premise flaky); with 8, the first came alone and the
    # other 7 together, in each of 6 runs.
    g.addoption("--concurrency", type=int, default=8,
                help="concurrent server requests in the ragged-audio load check")
    g.addoption("--stress-concurrency", type=int, default=16,
                help="concurrent server requests in the stress setting (with --stress)")
    g.addoption("--fuzz-budget", type=float, default=fuzz_session.BUDGET_S, metavar="SECONDS",
                help="seconds each fuzz check draws new examples for, per model (a failure found gets "
                     "--fuzz-shrink more to shrink)")
    g.addoption("--fuzz-shrink", type=float, default=fuzz_session.SHRINK_S, metavar="SECONDS",
                help="seconds to shrink a failure the fuzzer found, spent only on a failure")
    g.addoption("--fuzz-seed", type=int, default=None,
                help="the fuzzer's seed (default: a new one per run, written in each fuzz record)")
    g.addoption("--fuzz-db", default=str(ROOT / ".cache" / "fuzz-db"), metavar="DIR",
                help="the fuzzer's example database: failures found are kept here and tried first "
                     "the next time")
    g.addoption("--soak-seconds", type=float, default=SOAK_S, metavar="SECONDS",
                help=f"seconds the soak family loads each model's server (default {SOAK_S:g}; "
                     "make nightly: SOAK_SECONDS)")
    g.addoption("--cache-cells", choices=sorted(CACHE_CELLS), default="pairwise",
                help="the cache-consistency cells to run: a pairwise subset (6 cells, make run) or the "
                     "full matrix (24, make nightly)")
    g.addoption("--fuzz-replay", default=None, metavar="WORKLOAD_JSON",
                help="replay a workload the fuzzer wrote (its workload.json) as a check of its own: "
                     "runs test_fuzz_replay, and only it, for the workload's model")


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("audio_durations")
    config.stash[AUDIO_DURATIONS] = parse_durations(given) if given is not None else None
    for name in ("fuzz_budget", "fuzz_shrink", "soak_seconds"):
        value = config.getoption(name)
        if value is not None and not 0 < value < float("inf"):
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be a number of seconds above 0, got {value}")
    seed = config.getoption("fuzz_seed")
    config.stash[FUZZ_SEED] = random.SystemRandom().randrange(2 ** 32) if seed is None else seed
    if config.getoption("fuzz_replay"):
        try:
            config.stash[REPLAY] = read_spec(config.getoption("fuzz_replay"))
        except ValueError as e:
            raise pytest.UsageError(f"--fuzz-replay: {e}") from None
    for name in ("concurrency", "stress_concurrency"):
        if config.getoption(name) < 1:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be at least 1, "
                                    f"got {config.getoption(name)}")


def parse_durations(text: str) -> list[float]:
    """`--audio-durations`: the ragged batch needs two or more distinct,
    positive, finite durations."""
    try:
        durations = [float(x) for x in text.split(",")]
    except ValueError:
        raise pytest.UsageError(f"--audio-durations must be comma-separated seconds, e.g. "
                                f"1.0,3.5,7.0,12.0; got {text!r}") from None
    if len(durations) < 2 or any(not 0 < d < float("inf") for d in durations) \
            or len(set(durations)) != len(durations):
        raise pytest.UsageError(f"--audio-durations needs at least two different durations, each "
                                f"above 0 s (a ragged batch); got {text!r}")
    return durations


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One `clip` parameter per ragged-audio duration (first in the ids, as
    known-issue patterns expect); one `cell` per cache-matrix cell run, each
    with engines of its own (module scope)."""
    if "clip" in metafunc.fixturenames:
        given = metafunc.config.stash[AUDIO_DURATIONS]
        n = len(given) if given is not None else audio.RAGGED_CLIPS
        metafunc.parametrize("clip", range(n), ids=[f"clip{i}" for i in range(n)])
    if "cell" in metafunc.fixturenames:
        cells = CACHE_CELLS[metafunc.config.getoption("cache_cells")]
        metafunc.parametrize("cell", cells, ids=[c.id for c in cells], scope="module")


@pytest.fixture(scope="session")
def audio_durations(pytestconfig) -> list[float] | None:
    """`--audio-durations`, or None: each model's own, derived from its limits."""
    return pytestconfig.stash[AUDIO_DURATIONS]


@pytest.fixture(scope="session")
def fuzz(pytestconfig) -> FuzzSession:
    """The run's fuzzing settings: budget, seed, example database, and the
    folder reproducers go to."""
    budget = pytestconfig.getoption("fuzz_budget")
    shrink = pytestconfig.getoption("fuzz_shrink")
    run_dir = Path(pytestconfig.hook.pytest_mmharness_run_dir(config=pytestconfig))
    return FuzzSession(budget_s=budget, shrink_s=shrink,
                       seed=pytestconfig.stash[FUZZ_SEED], database_root=Path(pytestconfig.getoption("fuzz_db")),
                       out_root=run_dir / "fuzz")


@pytest.fixture(scope="session")
def soak_seconds(pytestconfig) -> float:
    return pytestconfig.getoption("soak_seconds")


@pytest.fixture(scope="module")
def soak_settings(pytestconfig, runner) -> SoakSettings:
    """The tier's soak load and bounds ([tiers.<tier>.soak] in the matrix)."""
    return soak_for_tier(runner.entry.tier, pytestconfig.getoption("models_file"))


@pytest.fixture(scope="session")
def replay_spec(pytestconfig) -> dict:
    """The workload --fuzz-replay names."""
    return pytestconfig.stash[REPLAY]


@pytest.fixture(scope="session")
def concurrency(pytestconfig):
    """Concurrent requests of a load setting (normal or stress)."""
    def of(setting: str) -> int:
        return pytestconfig.getoption("stress_concurrency" if setting == "stress" else "concurrency")
    return of


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out what this run never runs, so that a skip in the report is a
    real one: the stress settings without --stress (`make run` has it, `make
    test` not), and the TP sizes an entry does not run (its `lora.tp_sizes`,
    or `tp_sizes`)."""
    stress = config.getoption("stress")
    replay = config.stash.get(REPLAY, None)
    dropped = [item for item in items
               if (not stress and item.get_closest_marker("stress")) or _tp_not_run(item)
               or _not_replayed(item, replay)]
    if dropped:
        gone = set(dropped)
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in gone]


def _not_replayed(item: pytest.Item, replay: dict | None) -> bool:
    """A replay runs the replay check of the workload's model and nothing
    else; without one, the replay check is not run."""
    if getattr(item, "originalname", item.name) != "test_fuzz_replay":
        return replay is not None
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    entry = params.get("model_entry")
    return replay is None or entry is None or entry.name != replay["model"]


def _tp_not_run(item: pytest.Item) -> bool:
    """A TP size the entry does not run: the LoRA family's outside its
    `lora.tp_sizes` (every size where it names none), another family's
    above 1 outside its `tp_sizes`."""
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    entry, tp = params.get("model_entry"), params.get("tp")
    if tp is None or not hasattr(entry, "tp_sizes"):  # no entry (pytest's NOTSET where none is selected)
        return False
    if item.path.name == "test_vision_lora.py":
        sizes = (entry.lora or {}).get("tp_sizes")
        return sizes is not None and tp not in sizes
    return tp > 1 and tp not in entry.tp_sizes
