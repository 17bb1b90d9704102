"""pytest plugin: the card a low-memory scenario runs on, on both tiers.

The card is `--card PROFILE`, or else the model's default (`card` in
models.toml). The `card` fixture (one per model) gives a Card:
  - GPU tier: a ballast process holds enough device memory to leave exactly
    the profile's capacity free, and the engine gets gpu_memory_utilization
    = profile budget / physical total, so the engine's memory query answers
    the card's real figures;
  - CPU tier: the engine's memory query answers the card's figures through
    the in-engine shim, scaled to the model (harness/memory/card/emulation.py).
A Card that cannot be set up says why, and every check that needs it fails
with that reason (`card.require()`): the family never stays green without
testing low memory.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pytest

from harness.checks.budget_probe import load_gemma4_encoder_chunk
from harness.verdicts import Cause, CheckFailure
from harness.engines.devices import Lease, NoDeviceLeft
from harness.engines.parallel import NotHostable
from harness.memory.card import ballast as ballast_mod
from harness.memory.card.capacity import check_within_budget, engine_peak
from harness.memory.card.emulation import MemoryAnswer, card_answer, encoder_scale, vision_position_embeddings
from harness.memory.card.profiles import (CardProfile, UnknownCard, after_load_record, get_profile,
                                          gpu_memory_utilization)
from harness.memory.samplers import SamplerResult, used_series
from harness.memory.samplers.leak import gpu_baseline
from harness.results.record import CheckRecord

PROFILE = pytest.StashKey[CardProfile | None]()


@dataclass
class Card:
    """The card of one model's low-memory checks, or why there is none."""
    profile: CardProfile | None
    # The card as the engine's memory query sees it; scaled to the model.
    answer: MemoryAnswer | None = None
    ready: ballast_mod.BallastReady | None = None  # GPU tier: the ballast
    baseline_used: int = 0  # device used before the ballast
    device: int = 0
    reason: str = ""  # why there is no card

    @property
    def emulating(self) -> bool:
        """A ballast makes the device itself the card."""
        return self.ready is not None

    @property
    def available(self) -> bool:
        return not self.reason and (self.emulating or self.answer is not None)

    def require(self) -> None:
        if not self.available:
            raise CheckFailure(Cause.PREMISE, f"no card to test low memory on: {self.reason}")

    @property
    def ballast_bytes(self) -> int:
        """What the ballast holds on the device, CUDA context included."""
        return self.ready.total_bytes - self.ready.free_bytes - self.baseline_used

    def engine_overrides(self) -> dict:
        if not self.emulating:
            return {}
        return {"gpu_memory_utilization": round(gpu_memory_utilization(self.profile,
                                                                       self.ready.total_bytes), 4)}

    def steering(self) -> dict:
        """How a run steers the engine onto the card: nothing where the
        ballast makes the real figures the card's, else the emulated answer."""
        return {} if self.emulating or self.answer is None else self.answer.as_steering()

    def describe(self) -> dict:
        return {"card": self.profile.id if self.profile else None,
                "how": "ballast on the device" if self.emulating else "emulated memory query",
                "memory_query": self.answer.describe() if self.answer else None,
                "scale": self.answer.scale if self.answer else None}

    def stated_chunk(self, model_dir: str, engine_python: str):
        """(patches, free, total) -> the chunk the engine's own Gemma4 chunk
        function states, with the model's position-embedding size; skips
        saying why where that function cannot be loaded here."""
        fn, source = load_gemma4_encoder_chunk(engine_python)
        if fn is None:
            pytest.skip(f"the engine's chunk function: {source}")
        positions = vision_position_embeddings(model_dir)
        return lambda patches, free, total: int(fn(patches, free, total, positions))

    def check_peak(self, window: SamplerResult | None) -> dict:
        """The engine's peak in this memory window (NVML per process, or
        device arithmetic where pids do not match) stays within the budget
        the engine was given on the emulated card. Returns the figures it
        compared."""
        self.require()
        if not self.emulating:
            pytest.skip("the card lives in the engine's memory query only (no ballast on this tier): "
                        "the host's peak is not the card's")
        if window is None or not window.timeline:
            raise ValueError("no memory samples of the engine in this window")
        first_used = window.timeline[0][1][used_series(self.device)]
        peak = engine_peak(window, self.device, baseline_used=self.baseline_used,
                           ballast_bytes=self.ballast_bytes)
        evidence = {"after_load": after_load_record(self.profile, self.ready.total_bytes - first_used),
                    "engine_peak": asdict(peak)}
        check_within_budget(self.profile, peak)
        return evidence


class _Ballasts:
    """The GPU tier's ballast, one at a time, for one model's card checks.
    It gets a whole GPU of its own from the run's device ledger (GPU 0 where
    there is none), and gives it back when the model's checks are done, so
    that no GPU stays held between modules."""

    def __init__(self, python: str, pool):
        self.python, self.pool = python, pool
        self.held: tuple[ballast_mod.Ballast, Lease | None, dict[int, int]] | None = None

    def start(self, profile: CardProfile, answer: MemoryAnswer, holder: str) -> Card:
        self.close()
        reason = ballast_mod.emulation_unavailable_reason(self.python)
        if reason:
            return Card(profile, answer, reason=reason)
        try:
            lease = self.pool.card_lease(holder)
        except NotHostable as e:
            pytest.skip(str(e))
        except NoDeviceLeft as e:
            return Card(profile, answer, reason=str(e))
        device = lease.devices[0] if lease else 0
        baseline = gpu_baseline([device])
        # With a lease the ballast sees its GPU only, as CUDA device 0.
        ballast = ballast_mod.Ballast(profile.capacity_bytes, 0 if lease else device, python=self.python,
                                      env=lease.env() if lease else None)
        self.held = (ballast, lease, baseline)
        try:
            ready = ballast.start()
        except BaseException:
            self.close()
            raise
        self.pool.own_pids.append(ready.pid)
        return Card(profile, answer, ready, baseline[device], device)

    @property
    def lease(self) -> Lease | None:
        """The held ballast's GPU, where the run's ledger gave one."""
        return self.held[1] if self.held else None

    def close(self) -> None:
        if self.held:
            (ballast, lease, baseline), self.held = self.held, None
            ballast.stop()
            if lease:
                self.pool.return_card(lease, baseline)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mmharness card").addoption(
        "--card", default=None, help="the card profile low-memory checks run on, e.g. l4-22g "
                                     "(default: each model's `card` in models.toml)")


def pytest_configure(config: pytest.Config) -> None:
    card = config.getoption("card")
    try:
        config.stash[PROFILE] = get_profile(card) if card else None
    except UnknownCard as e:
        raise pytest.UsageError(f"--card: {e}") from None


@pytest.fixture(scope="session")
def _ballasts(pytestconfig, engine_interpreter, engine_pool):
    ballasts = _Ballasts(str(engine_interpreter.python), engine_pool)
    yield ballasts
    ballasts.close()


@pytest.fixture(scope="module")
def card(pytestconfig, runner, _ballasts) -> Card:
    """This model's card: --card, or the model's default. On the GPU tier
    its ballast and GPU are given back after the module's checks of the model."""
    profile = pytestconfig.stash[PROFILE] or (get_profile(runner.entry.card) if runner.entry.card else None)
    if profile is None:
        yield Card(None, reason=f"no --card given and {runner.entry.name} names no default card "
                                "in the model matrix")
    elif pytestconfig.getoption("tier") != "gpu":
        yield Card(profile, card_answer(profile, encoder_scale(runner.model)))
    else:
        card = _ballasts.start(profile, card_answer(profile, encoder_scale(runner.model)),
                               holder=f"card {profile.id} for {runner.entry.name}")
        if card.emulating and _ballasts.lease:  # engines on the card run on its GPU
            runner.on_card(card.engine_overrides(), _ballasts.lease)
        yield card
        _ballasts.close()


def pytest_mmharness_record(record: CheckRecord, item: pytest.Item | None) -> None:
    """A check that used the card says which; with a ballast, it plots its capacity."""
    card = getattr(item, "funcargs", {}).get("card") if item is not None else None
    if isinstance(card, Card) and card.profile is not None:
        record.params["card"] = card.profile.id
        if card.emulating:
            record.memory_budget = {used_series(card.device): card.profile.budget_bytes()}
