"""`--card PROFILE`: emulate a smaller GPU on a big one (GPU tier).

A ballast process holds enough device memory to leave exactly the profile's
capacity free; engines for scenarios that ask for the card get
gpu_memory_utilization = profile budget / physical total, so vLLM's own
start-up check passes. Without NVML and CUDA, scenarios that need emulation
are skipped with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.card import ballast as ballast_mod
from harness.card.profiles import CardProfile, UnknownCard, get_profile, gpu_memory_utilization
from harness.samplers.leak import gpu_baseline

PROFILE = pytest.StashKey[CardProfile | None]()


@dataclass
class CardEmulation:
    profile: CardProfile
    ready: ballast_mod.BallastReady
    baseline_used: int  # device used before the ballast
    device: int = 0

    @property
    def ballast_bytes(self) -> int:
        """What the ballast holds on the device, CUDA context included."""
        return self.ready.total_bytes - self.ready.free_bytes - self.baseline_used

    def engine_overrides(self) -> dict:
        return {"gpu_memory_utilization": round(gpu_memory_utilization(self.profile,
                                                                       self.ready.total_bytes), 4)}


def pytest_configure(config: pytest.Config) -> None:
    card = config.getoption("card")
    try:
        config.stash[PROFILE] = get_profile(card) if card else None
    except UnknownCard as e:
        raise pytest.UsageError(f"--card: {e}") from None


@pytest.fixture(scope="session")
def card(pytestconfig, engine_interpreter, engine_pool):
    """The emulated card, or a skip saying why there is none."""
    profile = pytestconfig.stash[PROFILE]
    if profile is None:
        pytest.skip("no --card given: nothing to emulate")
    if pytestconfig.getoption("tier") != "gpu":
        pytest.skip(f"--card {profile.id} is a GPU-tier setting; this is the CPU tier")
    python = str(engine_interpreter.python)
    reason = ballast_mod.emulation_unavailable_reason(python)
    if reason:
        pytest.skip(reason)
    baseline = gpu_baseline([0])[0]
    with ballast_mod.Ballast(profile.capacity_bytes, 0, python=python) as ready:
        engine_pool.own_pids.append(ready.pid)
        yield CardEmulation(profile, ready, baseline)
