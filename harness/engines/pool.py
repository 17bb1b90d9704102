"""Engines shared across scenarios, keyed on their spec (kind, model,
interpreter, engine args, environment): `get(spec)` hands out the engine's
handle, which carries the engine and what the pool knows of it (its
memory watch, its failed starts, the engine use it crashed in, whether it was
evicted), so no caller looks an engine up again.

Scenarios with the same configuration share one engine start. A crashed
engine, or one whose processes died, is replaced for the next use; the
crash stays recorded against the use that saw it (see `served`). The
pool cannot see which uses come later: its user releases the engines it
no longer needs (`mark` then `release_since`), so that engines do not pile
up in memory across a run, and retires those a failed check ran on before
the check runs again (`retire`); a released or retired engine's handle
says `evicted`, so a user that comes back to it starts a new one.

Where engines run is its placement's (harness.engines.placement, planned
by harness.schedule.placement): on the GPU tier each engine holds a lease of
its own GPUs, sees only them, and gives them back after its leak check: a
GPU whose memory did not come back is taken out of the run. An engine that
cannot get its GPUs first makes room by retiring this pool's other engines
(their handles say `evicted`). A card's GPU is leased by the card
(`card_lease`, `return_card`) and its engines run there one at a time. On
the CPU tier the placement holds a slot of the engine turn while any of the
pool's engines is up or starting.

On the CPU tier the scheduler (harness.schedule.ahead) has the next engine
a module needs started ahead (`start_ahead`). `get` then takes it over, and
what was started ahead but never asked for is retired with `drop_ahead`.
The GPU tier leases GPUs one start at a time, so nothing is started ahead
there.
"""
from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.engines.base import Engine
from harness.engines.devices import Lease
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import EngineStartupFailed
from harness.engines.parallel import threads_in_process
from harness.engines.placement import Placement, Unplaced
from harness.engines.remote import RemoteEngine
from harness.engines.retry import retry_for
from harness.engines.server import ServerEngine
from harness.files import slug
from harness.memory.samplers.leak import DEFAULT_WAIT_S, LeakVerdict, check_gpu_teardown
from harness.memory.watch import MemoryWatch

KINDS = ("offline", "server", "remote")
@dataclass(frozen=True)
class EngineSpec:
    """What an engine is: its kind (offline, server, or remote: a server the
    harness did not start, whose URL is the model), the model, the
    interpreter that runs it, its arguments and extra environment, and the
    name its logs and records use. Engines of one `key` are one engine."""
    kind: str
    model: str
    python: str
    args: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    name: str = "engine"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown engine kind {self.kind!r}; known: {list(KINDS)}")

    @property
    def key(self) -> str:
        return json.dumps([self.kind, self.model, self.args, str(self.python), self.env], sort_keys=True,
                          default=str)


@dataclass(eq=False)
class EngineHandle:
    """An engine's handle: the engine, and what the pool knows of it."""
    engine: Engine
    watch: MemoryWatch | None = None
    served: list[str] = field(default_factory=list)
    crashed_in: str | None = None
    # The leak check at teardown; None until it ran, or when nothing was watched.
    leak_verdict: LeakVerdict | None = None
    survivors: list[int] = field(default_factory=list)
    no_leak_check_reason: str = "no memory watch on this engine"
    # The pool's hand-out count when this engine was last handed out.
    last_handed_out: int = 0
    # GPU tier with a ledger: the engine's devices; `owns_lease` False when
    # they are a card's, given back by the card.
    lease: Lease | None = None
    owns_lease: bool = True
    # Its GPUs whose memory did not come back: out of the run.
    taken_out: list[int] = field(default_factory=list)
    # The failed starts before this engine came up, each retried (harness.engines.retry).
    attempts: list[dict] = field(default_factory=list)
    # What it was asked for as: a rerun's engine of the same spec starts ahead of its use.
    spec: EngineSpec | None = None
    # Retired while its user may come back to it (to make room for another
    # engine, after its module's checks, before a failed check's rerun):
    # that user must get a new one. Never set for a crash, which later
    # checks must see.
    evicted: bool = False

    def record_crash(self, label: str) -> None:
        """The engine use that saw the engine crash (the first one)."""
        if self.crashed_in is None:
            self.crashed_in = label


@dataclass(frozen=True)
class EngineStart:
    """What a start's watcher is told: when it begins, and how it ended."""
    kind: str
    name: str
    log: Path
    seconds: float | None = None  # None: it has just begun
    outcome: str | None = None    # "ready", "retrying: <reason>", "failed: <cause>"
    ahead: bool = False           # started ahead of its first use (EnginePool.start_ahead)
    # Of `seconds`, the wait for its devices: the CPU tier's engine turn
    # (another worker's `alone` module), the GPU tier's lease.
    waited_s: float = 0.0


def _reusable(engine: Engine) -> bool:
    """Ready, not crashed, and its processes still alive (one may have died
    between two scenarios, with nobody asking it anything)."""
    if engine.crashed or not engine.ready:
        return False
    proc = getattr(engine, "proc", None)  # a remote engine has no process of ours
    return proc is None or proc.death() is None


class EnginePool:
    def __init__(self, interpreter: EngineInterpreter, logs_dir: Path, *,
                 start_timeout: float = 600, request_timeout: float = 600, watch_memory: bool = True,
                 placement: Placement | None = None, leak_wait_s: float = DEFAULT_WAIT_S,
                 log_prefix: str = "", stall_s: float | None = None):
        self.interpreter, self.logs_dir = interpreter, Path(logs_dir)
        self.placement = placement or Unplaced()
        # Before each engine log's number: an xdist worker's id, so that two
        # workers' engines never share a log (nor a teardown record's id).
        self.log_prefix = log_prefix
        # A card's GPUs its engines left unrecovered, taken out when the card gives it back.
        self._card_losses: dict[Lease, dict[int, str]] = {}
        self._returned: set[Lease] = set()
        self.watch_memory, self.leak_wait_s = watch_memory, leak_wait_s
        # Harness processes on the device (the card ballast): they prove NVML's
        # pids comparable with ours, and are never counted as the engine's.
        self.own_pids: list[int] = []
        self.start_timeout, self.request_timeout = start_timeout, request_timeout
        self.stall_s = stall_s  # each engine's stall bound (harness.engines.progress); None: unwatched
        self.handles: dict[str, EngineHandle] = {}
        self.retired: list[EngineHandle] = []
        self._count = 0
        self._handed_out = 0
        self._interrupted = False
        # Started ahead and not yet handed out: each start's future, and its
        # engine once constructed (what an interrupt must stop).
        self._ahead: dict[str, Future] = {}
        self._ahead_engines: dict[str, Engine] = {}
        # The log count and the engine turn are shared with the threads starting ahead.
        self._lock = threading.Lock()
        # Told when each engine start begins and ends (progress lines).
        self.on_start: Callable[[EngineStart], None] = lambda start: None

    def spec(self, kind: str, model: str, args: dict | None = None, env: dict | None = None,
             name: str = "engine") -> EngineSpec:
        """A spec of an engine run by this pool's interpreter."""
        return EngineSpec(kind, model, str(self.interpreter.python), dict(args or {}), dict(env or {}), name)

    def get(self, spec: EngineSpec, *, label: str, gpus: int = 1, lease: Lease | None = None) -> EngineHandle:
        """The handle of a ready engine of this spec, started or reused. With
        a ledger on the GPU tier it runs on `gpus` GPUs of its own, or on a
        card's `lease`. Raises NotHostable when the run cannot give the GPUs,
        NoDeviceLeft when leaks took out every GPU."""
        handle = self.handles.get(spec.key)
        if handle and not _reusable(handle.engine):
            self._retire(self.handles.pop(spec.key), grace=0.2)
            handle = None
        if handle is None:
            handle = self._take_ahead(spec.key) or self._start(spec, label, gpus, lease)
            handle.spec = spec
            self.handles[spec.key] = handle
        handle.served.append(label)
        self._handed_out += 1
        handle.last_handed_out = self._handed_out
        return handle

    def start_ahead(self, spec: EngineSpec, *, label: str) -> bool:
        """Begin starting an engine of `spec` in the background, for a later
        `get` to take over (waiting for it when it is not ready yet). Only on
        the CPU tier, and not when this spec is up or on its way already.
        Returns whether a start began."""
        if (spec.kind == "remote" or self.interpreter.tier == "gpu" or self._interrupted
                or spec.key in self.handles or spec.key in self._ahead):
            return False
        future: Future = Future()

        def start() -> None:
            try:
                handle = self._start(spec, label, 1, None, ahead=True)
                if self._interrupted:  # it came up after the run was stopped: nothing of it may outlive the run
                    handle.engine.close(grace=0.2)
                    raise RuntimeError("the run was interrupted while this engine started ahead")
                future.set_result(handle)
            except BaseException as e:  # the failure is its taker's, raised by `get`
                future.set_exception(e)
        self._ahead[spec.key] = future
        threading.Thread(target=start, name=f"start-ahead-{spec.name}", daemon=True).start()
        return True

    def holds(self, key: str) -> bool:
        """Whether an engine of this spec key is up or on its way."""
        return key in self.handles or key in self._ahead

    def starting_ahead(self) -> bool:
        """Whether a start ahead is still under way."""
        return any(not future.done() for future in self._ahead.values())

    def wait_ahead(self) -> None:
        """Wait until every start begun ahead has ended, ready or failed (a
        failure is raised later, by the `get` that takes it over): for a
        scenario whose timings another start must not disturb."""
        for future in list(self._ahead.values()):
            future.exception()

    def _take_ahead(self, key: str) -> EngineHandle | None:
        """The engine started ahead for this key once it is up; None when
        there is none, or it died before it was asked for. A failed start
        raises here, in the use that needed it."""
        future = self._ahead.pop(key, None)
        if future is None:
            return None
        try:
            handle = future.result()
        finally:
            self._ahead_engines.pop(key, None)
        if not _reusable(handle.engine):
            self._retire(handle, grace=0.2)
            self._settle(handle)
            return None
        return handle

    def drop_ahead(self) -> None:
        """Retire the engines started ahead that nobody asked for (their
        checks were deselected or skipped), once their starts end."""
        for key in list(self._ahead):
            try:
                handle = self._take_ahead(key)
            except Exception:  # it served nothing; its log keeps the failure
                continue
            if handle is not None:
                self._retire(handle)
                self._settle(handle)
        self._end_turn()

    def mark(self) -> int:
        """A point in the run; `release_since(mark)` retires what was handed out after it."""
        return self._handed_out

    def release_since(self, mark: int, *, name: str | None = None,
                      keep: frozenset[str] | set[str] = frozenset()) -> list[EngineHandle]:
        """Retire the engines handed out since `mark` (a module's, when its
        checks are done), only those called `name` if given (one model's),
        but for those whose spec key is in `keep` (a later check needs
        them), and run their leak checks at once."""
        return self._release([e for e in self.handles.values()
                              if e.last_handed_out > mark and (name is None or e.engine.name == name)
                              and (e.spec is None or e.spec.key not in keep)])

    def retire(self, handles: list[EngineHandle]) -> list[EngineHandle]:
        """Retire these engines now, those not retired yet, and run their
        leak checks: a failed check runs again on fresh engines of the same
        specs (their users see them `evicted` and get new ones)."""
        return self._release([e for e in self.handles.values() if e in handles], also=handles)

    def _release(self, handles: list[EngineHandle], also: list[EngineHandle] = ()) -> list[EngineHandle]:
        """Retire `handles`, then their leak checks. Every one of them (and
        of `also`, retired before) is `evicted`: a user that comes back to
        it gets a new engine."""
        for key in [k for k, e in self.handles.items() if e in handles]:  # handles compare by identity
            del self.handles[key]
        self._settle_give_ups()
        for handle in handles:
            self._retire(handle)
        for handle in handles:
            self._settle(handle)
        for handle in [*handles, *also]:
            handle.evicted = True
        self._end_turn()
        return handles

    def _settle_give_ups(self) -> None:
        """A crashed engine's tear-down runs behind its verdict: let it end
        before another engine starts or is torn down."""
        for handle in self.handles.values():
            handle.engine.settle()

    def _start(self, spec: EngineSpec, label: str, gpus: int, lease: Lease | None, *,
               ahead: bool = False) -> EngineHandle:
        """Start an engine; a start-up failure of the infrastructure (a port
        race, memory not yet free) is tried once more, never anything else.
        Every failed start keeps its own log and is listed in `attempts`, of
        the handle or of the failure raised. A failed start gives its devices
        back (after its leak check) before the next one takes its own."""
        attempts: list[dict] = []
        if not ahead:  # (the handles are the main thread's)
            self._settle_give_ups()
        while True:
            with self._lock:
                self._count += 1
                count = self._count
            kind, name = spec.kind, spec.name
            log = self.logs_dir / f"{self.log_prefix}{count:02d}-{kind}-{slug(name, 80)}.log"
            self.on_start(EngineStart(kind, name, log, ahead=ahead))
            began, waited = time.monotonic(), {}
            try:
                handle = self._start_once(spec, log, label, gpus, lease, ahead=ahead, waited=waited)
            except EngineStartupFailed as e:
                retry = None if attempts else retry_for(e.crash)
                attempts.append({"cause": e.crash.cause.value, "detail": e.crash.detail[-500:],
                                 "retried": retry.reason if retry else None, "log": str(log)})
                outcome = f"retrying: {retry.reason}" if retry else f"failed: {e.crash.cause.value}"
                self.on_start(EngineStart(kind, name, log, time.monotonic() - began, outcome, ahead,
                                          waited.get("s", 0.0)))
                if retry is None:
                    e.attempts = attempts
                    raise
                time.sleep(retry.delay_s)
                continue
            self.on_start(EngineStart(kind, name, log, time.monotonic() - began, "ready", ahead,
                                      waited.get("s", 0.0)))
            handle.attempts = attempts
            return handle

    def _start_once(self, spec: EngineSpec, log: Path, label: str, gpus: int, lease: Lease | None, *,
                    ahead: bool = False, waited: dict | None = None) -> EngineHandle:
        """`waited["s"]`: how long it waited for its devices."""
        if spec.kind == "remote":
            return EngineHandle(RemoteEngine(spec.model, name=spec.name, request_timeout=self.request_timeout).start())
        asked = time.monotonic()
        lease, owns = self._devices_for(label, gpus, lease)
        if waited is not None:
            waited["s"] = time.monotonic() - asked
        cls = OfflineEngine if spec.kind == "offline" else ServerEngine
        env = {**spec.env, **(lease.env() if lease else {}), **self.placement.env(spec)}
        engine = cls(spec.model, spec.args, self.interpreter, log, name=spec.name,
                     env=env | threads_in_process(env),
                     start_timeout=self.start_timeout, request_timeout=self.request_timeout)
        engine.stall_s = self.stall_s
        if ahead:
            with self._lock:
                self._ahead_engines[spec.key] = engine
        watch = (MemoryWatch(self.interpreter.tier, own_pids=tuple(self.own_pids), wait_s=self.leak_wait_s,
                             devices=lease.devices if lease else None) if self.watch_memory else None)
        if watch:
            watch.before_start()
        handle = EngineHandle(engine, watch, lease=lease, owns_lease=owns)
        try:
            engine.start()
        except KeyboardInterrupt:  # Ctrl-C while it starts: nothing of it may outlive the run
            engine.close(grace=0.2)
            raise
        except EngineStartupFailed:
            if lease:  # its GPUs come back once their memory has, or are taken out against it
                handle.served.append(label)
                self.retired.append(handle)
                self._settle(handle)
            self._end_turn()
            raise
        if watch:
            watch.start(engine.proc.pid)
        return handle

    # --- devices -------------------------------------------------------------------
    def _devices_for(self, label: str, gpus: int, lease: Lease | None) -> tuple[Lease | None, bool]:
        """The GPUs a new engine runs on and whether it owns them (a card's
        are the card's), once the placement gives them."""
        if lease is not None:  # one card, one engine on it: the one before goes
            for key in [k for k, e in self.handles.items() if e.lease == lease]:
                self._evict(key)
            return lease, False
        return self.placement.devices_for(label, gpus, self._make_room), True

    def _make_room(self) -> bool:
        """Retire this pool's least recently used engine that holds GPUs of
        its own; False when there is none."""
        keys = sorted((k for k, e in self.handles.items() if e.lease and e.owns_lease),
                      key=lambda k: self.handles[k].last_handed_out)
        if keys:
            self._evict(keys[0])
        return bool(keys)

    def _evict(self, key: str) -> None:
        handle = self.handles.pop(key)
        handle.evicted = True
        self._retire(handle)
        self._settle(handle)

    def _settle(self, handle: EngineHandle) -> None:
        """After teardown: the leak check (a bounded wait for memory to come
        back), then the engine's GPUs go back to the ledger, those that did
        not recover taken out against the scenarios it served."""
        if handle.watch and handle.leak_verdict is None and not self._interrupted:
            handle.leak_verdict = handle.watch.leak_check(handle.served)
        if handle.lease is None or handle.lease in self._returned:
            return
        self._returned.add(handle.lease)
        handle.taken_out = handle.leak_verdict.unrecovered_devices if handle.leak_verdict else []
        lost = {d: f"memory not back after engine {Path(str(handle.engine.log_path or handle.engine.name)).stem} "
                   f"(served: {', '.join(handle.served) or 'none'})" for d in handle.taken_out}
        if handle.owns_lease:
            self.placement.release(handle.lease, lost)
        else:
            self._card_losses.setdefault(handle.lease, {}).update(lost)

    def _end_turn(self) -> None:
        """What the placement holds goes to another worker once none of our
        engines is up or on its way."""
        if not self.handles and not self._ahead:
            self.placement.idle()

    def card_lease(self, holder: str) -> Lease | None:
        """One whole GPU for a card's ballast and the engines run on it
        (GPU tier with a ledger; None otherwise)."""
        return self.placement.card_lease(holder, self._make_room)

    def return_card(self, lease: Lease, baseline_used: dict[int, int]) -> None:
        """The card's ballast is gone: its GPU goes back once its memory is
        back at `baseline_used` (taken before the ballast), else it is taken
        out, as it is when an engine on the card left memory behind."""
        for key in [k for k, e in self.handles.items() if e.lease == lease]:
            self._evict(key)
        lost = self._card_losses.pop(lease, {})
        if not self._interrupted:
            verdict = check_gpu_teardown(baseline_used, uses=[lease.holder], timeout_s=self.leak_wait_s)
            lost.update({d: f"memory not back after the card ballast of {lease.holder}"
                         for d in verdict.unrecovered_devices if d not in lost})
        self.placement.release(lease, lost)

    # A retired engine's tree gets this long after SIGTERM before SIGKILL: a
    # TP 4 engine on 2 cores took 6 s to close alone and over 10 s beside
    # other engines, and one killed before its ranks unlink their shared
    # memory leaves /dev/shm segments behind. A tree that exits sooner is not
    # waited for.
    RETIRE_GRACE_S = 30.0

    def _retire(self, handle: EngineHandle, grace: float = RETIRE_GRACE_S) -> None:
        handle.survivors = handle.engine.close(grace=grace)
        if handle.watch:
            handle.watch.stop()
        self.retired.append(handle)

    def close_all(self) -> dict[str, list[int]]:
        """Tear every engine down, then each one's leak check not yet run,
        naming the uses it served. The checks wait until every engine is
        down: on a GPU, a baseline taken before engine A started cannot hold
        while a later engine B still runs. Returns survivors per engine log
        (must be empty)."""
        self._settle_give_ups()
        self.drop_ahead()
        for handle in reversed(list(self.handles.values())):
            self._retire(handle)
        self.handles.clear()
        for handle in self.retired:
            self._settle(handle)
        self._end_turn()
        return {str(e.engine.log_path or e.engine.name): e.survivors for e in self.retired}

    def interrupted(self, grace: float) -> None:
        """The run was interrupted: stop every engine now, with a short grace,
        and skip the leak checks (their waits would hold the user's Ctrl-C)."""
        with self._lock:
            self._interrupted = True
            starting = list(self._ahead_engines.values())
        for engine in starting:  # their starts fail, and nobody takes them over
            engine.close(grace=grace)
        self._ahead_engines.clear()
        self._ahead.clear()
        for handle in reversed(list(self.handles.values())):
            self._retire(handle, grace=grace)
        self.handles.clear()
        for handle in self.retired:
            handle.no_leak_check_reason = "the run was interrupted: no leak check"
            self._settle(handle)
        self._end_turn()
