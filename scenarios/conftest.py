"""Options only the scenario families read, checked when pytest starts:
a bad value stops the run with one message, before any engine starts."""
from __future__ import annotations

import pytest

AUDIO_DURATIONS = pytest.StashKey[list[float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("mmharness scenarios")
    g.addoption("--stress", action="store_true", default=False,
                help="also run stress settings (many concurrent requests); on in `make run`")
    g.addoption("--audio-durations", default="1.0,3.5,7.0,12.0",
                help="clip durations in seconds for the ragged-audio batch (comma-separated, "
                     "at least two, all different, each above 0)")
    g.addoption("--concurrency", type=int, default=4,
                help="concurrent server requests in the ragged-audio load check")
    g.addoption("--stress-concurrency", type=int, default=16,
                help="concurrent server requests in the stress setting (with --stress)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[AUDIO_DURATIONS] = parse_durations(config.getoption("audio_durations"))
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
    known-issue patterns expect)."""
    if "clip" in metafunc.fixturenames:
        n = len(metafunc.config.stash[AUDIO_DURATIONS])
        metafunc.parametrize("clip", range(n), ids=[f"clip{i}" for i in range(n)])


@pytest.fixture(scope="session")
def audio_durations(pytestconfig) -> list[float]:
    return pytestconfig.stash[AUDIO_DURATIONS]


@pytest.fixture(scope="session")
def concurrency(pytestconfig):
    """Concurrent requests of a load setting (normal or stress)."""
    def of(setting: str) -> int:
        return pytestconfig.getoption("stress_concurrency" if setting == "stress" else "concurrency")
    return of


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out what this run never runs, so that a skip in the report is a
    real one: the stress settings without --stress (`make run` has it, `make
    test` not), and the TP sizes an entry does not run (its `lora.tp_sizes`)."""
    stress = config.getoption("stress")
    dropped = [item for item in items
               if (not stress and item.get_closest_marker("stress")) or _tp_not_run(item)]
    if dropped:
        gone = set(dropped)
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in gone]


def _tp_not_run(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None) and item.callspec.params or {}
    entry, tp = params.get("model_entry"), params.get("tp")
    sizes = ((getattr(entry, "lora", None) or {}).get("tp_sizes")) if tp is not None else None
    return sizes is not None and tp not in sizes
