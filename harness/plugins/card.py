"""pytest plugin: `--card PROFILE`, emulating a smaller GPU on a big one (GPU tier).

A ballast process holds enough device memory to leave exactly the profile's
capacity free; engines for scenarios that ask for the card get
gpu_memory_utilization = profile budget / physical total, so vLLM's own
start-up check passes. The `card` fixture always gives a Card: one without
emulation says why, and its peak check is skipped with that reason.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pytest

from harness.card import ballast as ballast_mod
from harness.card.capacity import check_within_budget, engine_peak
from harness.card.profiles import CardProfile, UnknownCard, after_load_record, get_profile, gpu_memory_utilization
from harness.results.record import CheckRecord
from harness.samplers import SamplerResult, used_key
from harness.samplers.leak import gpu_baseline

PROFILE = pytest.StashKey[CardProfile | None]()


@dataclass
class Card:
    """The emulated card of this run, or why there is none."""
    profile: CardProfile | None
    ready: ballast_mod.BallastReady | None = None
    baseline_used: int = 0  # device used before the ballast
    device: int = 0
    reason: str = ""  # why nothing is emulated

    @property
    def emulating(self) -> bool:
        return self.ready is not None

    @property
    def ballast_bytes(self) -> int:
        """What the ballast holds on the device, CUDA context included."""
        return self.ready.total_bytes - self.ready.free_bytes - self.baseline_used

    def engine_overrides(self) -> dict:
        if not self.emulating:
            return {}
        return {"gpu_memory_utilization": round(gpu_memory_utilization(self.profile,
                                                                       self.ready.total_bytes), 4)}

    def check_peak(self, window: SamplerResult | None) -> dict:
        """The engine's peak in this memory window (NVML per process, or
        device arithmetic where pids do not match) stays within the budget
        the engine was given on the emulated card. Returns the figures it
        compared."""
        if not self.emulating:
            pytest.skip(self.reason)
        if window is None or not window.timeline:
            raise ValueError("no memory samples of the engine in this window")
        first_used = window.timeline[0][1][used_key(self.device)]
        peak = engine_peak(window, self.device, baseline_used=self.baseline_used,
                           ballast_bytes=self.ballast_bytes)
        evidence = {"after_load": after_load_record(self.profile, self.ready.total_bytes - first_used),
                    "engine_peak": asdict(peak)}
        check_within_budget(self.profile, peak)
        return evidence


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness card").addoption(
        "--card", default=None, help="emulate a smaller GPU card profile, e.g. l4-22g (GPU tier only)")


def pytest_configure(config: pytest.Config) -> None:
    card = config.getoption("card")
    try:
        config.stash[PROFILE] = get_profile(card) if card else None
    except UnknownCard as e:
        raise pytest.UsageError(f"--card: {e}") from None


@pytest.fixture(scope="session")
def card(pytestconfig, engine_interpreter, engine_pool):
    """The emulated card (a ballast holding the rest of the device), or a
    Card that says why there is none."""
    profile = pytestconfig.stash[PROFILE]
    if profile is None:
        yield Card(None, reason="no --card given: nothing to emulate")
        return
    if pytestconfig.getoption("tier") != "gpu":
        yield Card(profile, reason=f"--card {profile.id} is a GPU-tier setting; this is the CPU tier")
        return
    python = str(engine_interpreter.python)
    reason = ballast_mod.emulation_unavailable_reason(python)
    if reason:
        yield Card(profile, reason=reason)
        return
    baseline = gpu_baseline([0])[0]
    with ballast_mod.Ballast(profile.capacity_bytes, 0, python=python) as ready:
        engine_pool.own_pids.append(ready.pid)
        yield Card(profile, ready, baseline)


def pytest_mmharness_record(record: CheckRecord, item: pytest.Item | None) -> None:
    """A check that used the emulated card says which, and plots its capacity."""
    card = getattr(item, "funcargs", {}).get("card") if item is not None else None
    if isinstance(card, Card) and card.emulating:
        record.params["card"] = card.profile.id
        record.memory_budget = {used_key(card.device): card.profile.budget_bytes()}
