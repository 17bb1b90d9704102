"""What the engine pool asks of whoever places its engines: the devices a
start runs on (and the wait for them), the environment that binds it, and
word that the pool has nothing up. harness.schedule.placement plans it for
a run; a pool with no placement runs its engines where the spec says, with
nothing held."""
from __future__ import annotations

from typing import Callable, Protocol

from harness.engines.devices import Lease


class Placement(Protocol):
    # The module now running needs the machine to itself (CPU tier: every
    # slot of the engine turn; a GPU engine's devices are its own already).
    alone: bool

    def devices_for(self, label: str, gpus: int, make_room: Callable[[], bool]) -> Lease | None:
        """The lease a new engine runs on (GPU tier), or None once it may
        start (the CPU tier's engine turn, taken); waits while they are
        held. `make_room` retires one of the pool's own engines holding
        devices, False when there is none."""

    def env(self, spec) -> dict[str, str]:
        """What the engine's environment adds for where it runs (the spec's own environment aside)."""

    def idle(self) -> None:
        """The pool has no engine up nor on its way: what it holds may go to another worker."""

    def card_lease(self, holder: str, make_room: Callable[[], bool]) -> Lease | None:
        """One whole GPU for a card's ballast and its engines; None where there is no ledger."""

    def release(self, lease: Lease, lost: dict[int, str]) -> None:
        """Give a lease back, those of its devices in `lost` out of the run."""


class Unplaced:
    """No ledger: every engine starts at once, where its spec says."""
    alone = False

    def devices_for(self, label: str, gpus: int, make_room: Callable[[], bool]) -> Lease | None:
        return None

    def env(self, spec) -> dict[str, str]:
        return {}

    def idle(self) -> None:
        pass

    def card_lease(self, holder: str, make_room: Callable[[], bool]) -> Lease | None:
        return None

    def release(self, lease: Lease, lost: dict[int, str]) -> None:
        pass
