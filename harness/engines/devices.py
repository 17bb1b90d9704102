"""Which GPUs each engine (or a card's ballast) runs on, across every
pytest-xdist worker of a run.

One ledger file under the run directory says, per device, who holds it and
which devices were taken out of the run after a leak; every read-modify-
write of it happens under `fcntl.flock`, so two workers never get the same
GPU. A holder is a process: a device held by a process that died (a crashed
worker) counts as free again.

    ledger = DeviceLedger(run_dir / "devices.json", [0, 1, 2, 3])
    lease = ledger.acquire(2, "test_ragged_audio[gemma-4-e2b]")  # or NotHostable
    env = lease.env()             # CUDA_VISIBLE_DEVICES=0,1 in PCI bus order
    ledger.release(lease, lost={1: "leaked by ..."})  # gpu1 out for the rest of the run

The CPU tier uses the same ledger over its slots, the engine turn
(`DeviceLedger.turn`). Who takes what, and when, is planned in
harness.schedule.placement.

Indices are NVML's, and the lease's environment sets CUDA_DEVICE_ORDER=
PCI_BUS_ID so that CUDA numbers the visible devices in the same order.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from harness.engines.parallel import NotHostable, gpu_count

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# Long enough for another worker's module to finish its engines; a wait that
# runs out skips, naming who held the devices.
DEFAULT_WAIT_S = 3600.0
POLL_S = 0.1


class NoDeviceLeft(RuntimeError):
    """Every device of the run was taken out after a leak: nothing can run."""


@dataclass(frozen=True, eq=False)  # one lease is one hand-out: equal only to itself
class Lease:
    devices: tuple[int, ...]
    holder: str

    def env(self) -> dict[str, str]:
        """The environment that shows a process these devices only."""
        return {VISIBLE_ENV: ",".join(map(str, self.devices)), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def run_devices(environ: dict | None = None, count: Callable[[], int] | None = None) -> list[int]:
    """The devices this run may use: CUDA_VISIBLE_DEVICES where the caller
    set it (NVML indices, as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them),
    else every device NVML sees."""
    environ = os.environ if environ is None else environ
    given = environ.get(VISIBLE_ENV)
    if given is None:
        return list(range((count or gpu_count)()))
    try:
        return [int(d) for d in given.split(",") if d.strip()]
    except ValueError:
        raise ValueError(f"{VISIBLE_ENV}={given!r}: the scheduler takes device indices "
                         "(0,1,...), not UUIDs or MIG names") from None


class DeviceLedger:
    def __init__(self, path: Path, devices: list[int], *, poll_s: float = POLL_S, fair: bool = False):
        self.path, self.devices, self.poll_s = Path(path), list(devices), poll_s
        # fair: first come, first served, so that a worker waiting for every
        # slot is not overtaken for ever by one that takes a slot at a time.
        self.fair = fair
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def turn(cls, path: Path, slots: int = 1) -> "DeviceLedger":
        """The CPU tier's engine turn, over `slots` slots, served in turn."""
        return cls(path, list(range(slots)), fair=True)

    # --- the file, under its lock -----------------------------------------------
    @contextmanager
    def _locked(self):
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                before = self.path.read_text() if self.path.exists() else ""
                state = json.loads(before) if before else {"held": {}, "lost": {}}
                yield state
                after = json.dumps(state, indent=1, sort_keys=True)
                if after != before:  # a waiter's polls write nothing
                    tmp = self.path.with_suffix(".tmp")
                    tmp.write_text(after)
                    tmp.replace(self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def state(self) -> dict:
        with self._locked() as state:
            return json.loads(json.dumps(state))

    # --- taking and giving back ------------------------------------------------------
    def try_acquire(self, count: int, holder: str) -> Lease | None:
        """`count` free devices for `holder` (this process), or None while
        they are held. Raises NotHostable when the run can never give `count`
        (too few devices, or too few left after leaks), NoDeviceLeft when
        leaks took out every device."""
        with self._locked() as state:
            held = state["held"]
            for key in [k for k, h in held.items() if not psutil.pid_exists(h["pid"])]:
                del held[key]  # its holder died: a crashed worker
            usable = self._usable(count, holder, state, mine_too=False)
            # (the queue is a list: the file's keys are sorted, so "waiting" keeps no order)
            waiting = state.get("waiting", {})
            queue = [pid for pid in state.get("queue", []) if pid in waiting and psutil.pid_exists(int(pid))]
            if self.fair and queue and queue[0] != str(os.getpid()):
                return None  # another worker has waited longer
            free = [d for d in usable if str(d) not in held]
            if len(free) < count:
                return None
            for d in free[:count]:
                held[str(d)] = {"pid": os.getpid(), "holder": holder}
            _stop_waiting(state)  # in the same breath: no false deadlock
            return Lease(tuple(free[:count]), holder)

    def acquire(self, count: int, holder: str, *, wait_s: float = DEFAULT_WAIT_S,
                make_room: Callable[[], bool] | None = None) -> Lease:
        """Wait for `count` devices. While they are held, `make_room` (this
        worker retiring an engine of its own) is called first, until it
        returns False; then other workers are waited for, up to `wait_s`.
        Devices this worker still holds then are not waited for (NotHostable)."""
        deadline = time.monotonic() + wait_s
        try:
            while True:
                lease = self.try_acquire(count, holder)
                if lease is not None:
                    return lease
                if make_room is not None and make_room():
                    continue
                with self._locked() as state:
                    self._usable(count, holder, state, mine_too=True)
                    _wait_in(state, holder)
                if time.monotonic() >= deadline:
                    raise NotHostable(f"{count} GPU(s) for {holder}: none came free within {wait_s:.0f} s; "
                                      f"held: {_held_text(self.state()['held'])}")
                time.sleep(self.poll_s)
        finally:
            with self._locked() as state:
                _stop_waiting(state)

    def _usable(self, count: int, holder: str, state: dict, *, mine_too: bool) -> list[int]:
        """The devices not taken out; raises when `count` of them can never
        come free (with `mine_too`, counting those this process holds as
        never free)."""
        held, lost = state["held"], state["lost"]
        usable = [d for d in self.devices if str(d) not in lost]
        if not usable:
            raise NoDeviceLeft(f"no GPU left in this run: {_lost_text(lost)}")
        mine = [d for d in usable if mine_too and held.get(str(d), {}).get("pid") == os.getpid()]
        if count > len(usable) - len(mine):
            raise NotHostable(_short_of(count, holder, self.devices, lost, mine, held))
        return usable

    def release(self, lease: Lease, lost: dict[int, str] | None = None) -> None:
        """Give the lease's devices back, except those in `lost` (device ->
        why), which are out for the rest of the run."""
        lost = lost or {}
        with self._locked() as state:
            for d in lease.devices:
                state["held"].pop(str(d), None)
                if d in lost:
                    state["lost"][str(d)] = lost[d]

    def lost(self) -> dict[int, str]:
        return {int(d): why for d, why in self.state()["lost"].items()}


def _wait_in(state: dict, holder: str) -> None:
    """Note this worker as waiting. Raises NotHostable when every other
    worker that holds a device waits too (each for the others' devices, say
    two holding a card each): none of them would ever give one back."""
    waiting = state.setdefault("waiting", {})
    waiting[str(os.getpid())] = holder
    queue = state.setdefault("queue", [])
    if str(os.getpid()) not in queue:
        queue.append(str(os.getpid()))
    others = {h["pid"] for h in state["held"].values() if h["pid"] != os.getpid()}
    if others and all(str(pid) in waiting for pid in others):
        raise NotHostable(f"{holder}: every GPU is held by a worker that waits too (a deadlock): "
                          f"{_held_text(state['held'])}")


def _stop_waiting(state: dict) -> None:
    state.get("waiting", {}).pop(str(os.getpid()), None)
    if str(os.getpid()) in state.get("queue", []):
        state["queue"].remove(str(os.getpid()))


def _lost_text(lost: dict[str, str]) -> str:
    return "; ".join(f"gpu{d} taken out: {why}" for d, why in sorted(lost.items()))


def _held_text(held: dict[str, dict]) -> str:
    return ", ".join(f"gpu{d} by {h['holder']} (pid {h['pid']})" for d, h in sorted(held.items())) or "none"


def _short_of(count: int, holder: str, devices: list[int], lost: dict[str, str], mine: list[int],
              held: dict) -> str:
    text = f"{holder} needs {count} GPU(s); this run has {len(devices)}"
    if lost:
        text += f", {len(lost)} taken out ({_lost_text(lost)})"
    if mine:
        text += f", {len(mine)} held by this worker ({_held_text({str(d): held[str(d)] for d in mine})})"
    return text
