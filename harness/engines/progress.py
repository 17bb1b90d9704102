"""Progress, not health: whether the requests in flight move.

An engine can answer `/health` with 200 and never finish a request again (a
scheduler that spins on an item larger than its encoder cache, one that
stops admitting requests). The watch reads what the engine's own processes
wrote down (harness.engines.observations): a request progresses when a step
schedules tokens for it, and is done when the engine lists it as finished
(or its answer arrives). A request in flight that has made no progress for
the stall bound (since it was sent, or since its last step) is stalled, and
the engine is hung: the driver gives up on it as on a crashed one.

Request ids: the driver names each request it sends (the offline worker's
enqueue ids, a server's X-Request-Id header); the engine's own id contains
that name between dashes or at an end ("3" as "3-1a2b", "mmh-ab12" as
"chatcmpl-mmh-ab12").
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from harness.engines.observations import Observations, names

# Events that show the engine core at work (not the front end's cache lookups).
WORK_EVENTS = ("step", "encoder", "finished")
# How many of the last step events a hang's record keeps.
LAST_STEPS = 8
# How often the observation file is read while requests wait.
POLL_S = 0.5


@dataclass
class Stall:
    """A request in flight with no progress for `seconds` (the stall bound
    passed), and what the engine did meanwhile."""
    request: str
    seconds: float
    scheduled: bool           # it had been scheduled at least once
    engine_stepped_s: float | None  # seconds since the engine's last work event (None: none seen)
    last_steps: list[dict] = field(default_factory=list)

    def describe(self) -> str:
        state = "after its last step" if self.scheduled else "since it was sent, never scheduled"
        if self.engine_stepped_s is None:
            engine = "the engine did no work meanwhile"
        elif self.engine_stepped_s < self.seconds:
            engine = f"the engine's last step was {self.engine_stepped_s:.1f} s ago (other requests moved)"
        else:
            engine = f"the engine's last work was {self.engine_stepped_s:.1f} s ago"
        return f"request {self.request} made no progress for {self.seconds:.1f} s ({state}); {engine}"

    def to_dict(self) -> dict:
        return {"request": self.request, "seconds": round(self.seconds, 1), "scheduled": self.scheduled,
                "engine_stepped_s": None if self.engine_stepped_s is None else round(self.engine_stepped_s, 1),
                "last_steps": self.last_steps}


class ProgressWatch:
    """The requests a driver has in flight on one engine, against its stall
    bound. `poll()` reads new events (at most every POLL_S) and returns the
    first stalled request, or None."""

    def __init__(self, observations: Observations, stall_s: float, *,
                 clock: Callable[[], float] = time.monotonic):
        self.observations, self.stall_s, self.clock = observations, stall_s, clock
        self.offset = observations.mark()
        self.progress: dict[str, float] = {}   # request -> when it last moved (or was sent)
        self.scheduled: set[str] = set()
        self.last_work: float | None = None
        self.last_steps: deque = deque(maxlen=LAST_STEPS)
        # The longest any request went without progress, at a poll: what a
        # healthy engine shows, which the stall bound must exceed.
        self.longest_quiet_s = 0.0
        self._read_at = float("-inf")

    def expect(self, requests: list[str]) -> None:
        now = self.clock()
        for r in requests:
            self.progress.setdefault(r, now)

    def done(self, request: str) -> None:
        self.progress.pop(request, None)

    def poll(self) -> Stall | None:
        now = self.clock()
        if now - self._read_at >= POLL_S:
            self._read_at = now
            self._read(now)
        if not self.progress:
            return None
        request, moved = min(self.progress.items(), key=lambda kv: kv[1])
        self.longest_quiet_s = max(self.longest_quiet_s, now - moved)
        if now - moved <= self.stall_s:
            return None
        return Stall(request=request, seconds=now - moved, scheduled=request in self.scheduled,
                     engine_stepped_s=None if self.last_work is None else now - self.last_work,
                     last_steps=list(self.last_steps))

    def _read(self, now: float) -> None:
        if not self.observations.available:
            return
        events, self.offset = self.observations.read(self.offset)
        for event in events:
            kind = event.get("event") if isinstance(event, dict) else None
            if kind not in WORK_EVENTS:
                continue
            self.last_work = now
            if kind == "step":
                self.last_steps.append(event)
                self._moved(event.get("tokens") or {}, now)
            elif kind == "finished":
                for engine_id in event.get("requests") or []:
                    for r in self._named(engine_id):
                        self.done(r)

    def _moved(self, tokens: dict, now: float) -> None:
        for engine_id, n in tokens.items():
            if n:
                for r in self._named(engine_id):
                    self.longest_quiet_s = max(self.longest_quiet_s, now - self.progress[r])
                    self.progress[r] = now
                    self.scheduled.add(r)

    def _named(self, engine_id: str) -> list[str]:
        return [r for r in self.progress if names(str(engine_id), r)]
