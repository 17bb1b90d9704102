"""Engines shared across scenarios, keyed on (kind, model, engine args,
python, environment).

Scenarios with the same configuration share one engine start. A crashed
engine, or one whose processes died, is replaced for the next scenario; the
crash stays recorded against the scenario that saw it (see `served`). The
pool cannot see which scenarios come later: its user releases the engines it
no longer needs (`mark` then `release_since`), so that engines do not pile
up in memory across a run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.engines.base import Engine
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import EngineStartupFailed
from harness.engines.remote import RemoteEngine
from harness.engines.retry import retry_for
from harness.engines.server import ServerEngine
from harness.files import slug
from harness.memory.samplers.leak import LeakVerdict
from harness.memory.watch import MemoryWatch

KINDS = ("offline", "server")


@dataclass
class PoolEntry:
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
    # The failed starts before this engine came up, each retried (harness.engines.retry).
    attempts: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class EngineStart:
    """What a start's watcher is told: when it begins, and how it ended."""
    kind: str
    name: str
    log: Path
    seconds: float | None = None  # None: it has just begun
    outcome: str | None = None    # "ready", "retrying: <reason>", "failed: <cause>"


def config_key(kind: str, model: str, engine_args: dict, python: Path, env: dict | None = None) -> str:
    return json.dumps([kind, model, engine_args, str(python), env or {}], sort_keys=True, default=str)


def _reusable(engine: Engine) -> bool:
    """Ready, not crashed, and its processes still alive (one may have died
    between two scenarios, with nobody asking it anything)."""
    if engine.crashed or not engine.ready:
        return False
    proc = getattr(engine, "proc", None)  # a remote engine has no process of ours
    return proc is None or proc.death() is None


class EnginePool:
    def __init__(self, interpreter: EngineInterpreter, logs_dir: Path, *,
                 remote_url: str | None = None, start_timeout: float = 600,
                 request_timeout: float = 600, watch_memory: bool = True):
        self.interpreter, self.logs_dir = interpreter, Path(logs_dir)
        self.watch_memory = watch_memory
        # Harness processes on the device (the card ballast): they prove NVML's
        # pids comparable with ours, and are never counted as the engine's.
        self.own_pids: list[int] = []
        self.remote_url = remote_url
        self.start_timeout, self.request_timeout = start_timeout, request_timeout
        self.entries: dict[str, PoolEntry] = {}
        self.retired: list[PoolEntry] = []
        self._count = 0
        self._handed_out = 0
        self._interrupted = False
        # Told when each engine start begins and ends (progress lines).
        self.on_start: Callable[[EngineStart], None] = lambda start: None

    def get(self, kind: str, model: str, engine_args: dict, *, scenario: str,
            name: str = "engine", env: dict | None = None) -> Engine:
        """A ready engine for this configuration, started or reused."""
        if kind not in KINDS:
            raise ValueError(f"unknown engine kind {kind!r}; known: {list(KINDS)}")
        if self.remote_url:
            kind, model, engine_args = "remote", self.remote_url, {}
        key = config_key(kind, model, engine_args, self.interpreter.python, env)
        entry = self.entries.get(key)
        if entry and not _reusable(entry.engine):
            self._retire(self.entries.pop(key), grace=0.2)
            entry = None
        if entry is None:
            entry = self._start(kind, model, engine_args, name, env or {})
            self.entries[key] = entry
        entry.served.append(scenario)
        self._handed_out += 1
        entry.last_handed_out = self._handed_out
        return entry.engine

    def attempts_of(self, engine: Engine) -> list[dict]:
        """The failed starts before this engine came up (each retried)."""
        return next((e.attempts for e in [*self.entries.values(), *self.retired] if e.engine is engine), [])

    def mark(self) -> int:
        """A point in the run; `release_since(mark)` retires what was handed out after it."""
        return self._handed_out

    def release_since(self, mark: int, *, name: str | None = None) -> list[PoolEntry]:
        """Retire the engines handed out since `mark` (a module's, when its
        checks are done), only those called `name` if given (one model's),
        and run their leak checks at once."""
        keys = [k for k, e in self.entries.items()
                if e.last_handed_out > mark and (name is None or e.engine.name == name)]
        released = [self.entries.pop(k) for k in keys]
        for entry in released:
            self._retire(entry)
        for entry in released:
            if entry.watch and not self._interrupted:
                entry.leak_verdict = entry.watch.leak_check(entry.served)
        return released

    def _start(self, kind, model, engine_args, name, env) -> PoolEntry:
        """Start an engine; a start-up failure of the infrastructure (a port
        race, memory not yet free) is tried once more, never anything else.
        Every failed start keeps its own log and is listed in `attempts`, of
        the entry or of the failure raised."""
        attempts: list[dict] = []
        while True:
            self._count += 1
            log = self.logs_dir / f"{self._count:02d}-{kind}-{slug(name, 80)}.log"
            self.on_start(EngineStart(kind, name, log))
            began = time.monotonic()
            try:
                entry = self._start_once(kind, model, engine_args, name, env, log)
            except EngineStartupFailed as e:
                retry = None if attempts else retry_for(e.crash)
                attempts.append({"cause": e.crash.cause.value, "detail": e.crash.detail[-500:],
                                 "retried": retry.reason if retry else None, "log": str(log)})
                outcome = f"retrying: {retry.reason}" if retry else f"failed: {e.crash.cause.value}"
                self.on_start(EngineStart(kind, name, log, time.monotonic() - began, outcome))
                if retry is None:
                    e.attempts = attempts
                    raise
                time.sleep(retry.delay_s)
                continue
            self.on_start(EngineStart(kind, name, log, time.monotonic() - began, "ready"))
            entry.attempts = attempts
            return entry

    def _start_once(self, kind, model, engine_args, name, env, log: Path) -> PoolEntry:
        if kind == "remote":
            return PoolEntry(RemoteEngine(model, name=name, request_timeout=self.request_timeout).start())
        cls = OfflineEngine if kind == "offline" else ServerEngine
        engine = cls(model, engine_args, self.interpreter, log, name=name, env=env,
                     start_timeout=self.start_timeout, request_timeout=self.request_timeout)
        watch = MemoryWatch(self.interpreter.tier, own_pids=tuple(self.own_pids)) if self.watch_memory else None
        if watch:
            watch.before_start()
        try:
            engine.start()
        except KeyboardInterrupt:  # Ctrl-C while it starts: nothing of it may outlive the run
            engine.close(grace=0.2)
            raise
        if watch:
            watch.start(engine.proc.pid)
        return PoolEntry(engine, watch)

    # A retired engine's tree gets this long after SIGTERM before SIGKILL: a
    # TP 4 engine on 2 cores took 6 s to close alone and over 10 s beside
    # other engines, and one killed before its ranks unlink their shared
    # memory leaves /dev/shm segments behind. A tree that exits sooner is not
    # waited for.
    RETIRE_GRACE_S = 30.0

    def _retire(self, entry: PoolEntry, grace: float = RETIRE_GRACE_S) -> None:
        entry.survivors = entry.engine.close(grace=grace)
        if entry.watch:
            entry.watch.stop()
        self.retired.append(entry)

    def note_crash(self, engine: Engine, scenario: str) -> None:
        for entry in self.entries.values():
            if entry.engine is engine and entry.crashed_in is None:
                entry.crashed_in = scenario

    def watch_of(self, engine: Engine) -> MemoryWatch | None:
        return next((e.watch for e in self.entries.values() if e.engine is engine), None)

    def close_all(self) -> dict[str, list[int]]:
        """Tear every engine down, then each one's leak check not yet run,
        naming the scenarios it served. The checks wait until every engine is
        down: on a GPU, a baseline taken before engine A started cannot hold
        while a later engine B still runs. Returns survivors per engine log
        (must be empty)."""
        for entry in reversed(list(self.entries.values())):
            self._retire(entry)
        self.entries.clear()
        for entry in self.retired:
            if entry.watch and entry.leak_verdict is None and not self._interrupted:
                entry.leak_verdict = entry.watch.leak_check(entry.served)
        return {str(e.engine.log_path or e.engine.name): e.survivors for e in self.retired}

    def interrupted(self, grace: float) -> None:
        """The run was interrupted: stop every engine now, with a short grace,
        and skip the leak checks (their waits would hold the user's Ctrl-C)."""
        self._interrupted = True
        for entry in reversed(list(self.entries.values())):
            self._retire(entry, grace=grace)
        self.entries.clear()
        for entry in self.retired:
            entry.no_leak_check_reason = "the run was interrupted: no leak check"
