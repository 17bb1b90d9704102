"""Engines shared across scenarios, keyed on (kind, model, engine args, python).

Scenarios with the same configuration share one engine start. A crashed
engine is replaced for the next scenario; the crash stays recorded against
the scenario that saw it (see `served`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.engines.base import Engine
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.engines.remote import RemoteEngine
from harness.engines.server import ServerEngine

KINDS = ("offline", "server")


@dataclass
class PoolEntry:
    engine: Engine
    served: list[str] = field(default_factory=list)
    crashed_in: str | None = None


def engine_key(kind: str, model: str, engine_args: dict, python: Path) -> str:
    return json.dumps([kind, model, engine_args, str(python)], sort_keys=True, default=str)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80]


class EnginePool:
    def __init__(self, interpreter: EngineInterpreter, logs_dir: Path, *,
                 remote_url: str | None = None, start_timeout: float = 600,
                 request_timeout: float = 600):
        self.interpreter, self.logs_dir = interpreter, Path(logs_dir)
        self.remote_url = remote_url
        self.start_timeout, self.request_timeout = start_timeout, request_timeout
        self.entries: dict[str, PoolEntry] = {}
        self.retired: list[PoolEntry] = []
        self._count = 0

    def get(self, kind: str, model: str, engine_args: dict, *, scenario: str,
            name: str = "engine", env: dict | None = None) -> Engine:
        """A ready engine for this configuration, started or reused."""
        if kind not in KINDS:
            raise ValueError(f"unknown engine kind {kind!r}; known: {list(KINDS)}")
        if self.remote_url:
            kind, model, engine_args = "remote", self.remote_url, {}
        key = engine_key(kind, model, engine_args, self.interpreter.python)
        entry = self.entries.get(key)
        if entry and (entry.engine.crashed or not entry.engine.ready):
            self.retired.append(self.entries.pop(key))
            entry.engine.close(grace=0.2)
            entry = None
        if entry is None:
            entry = PoolEntry(self._start(kind, model, engine_args, name, env or {}))
            self.entries[key] = entry
        entry.served.append(scenario)
        return entry.engine

    def _start(self, kind, model, engine_args, name, env) -> Engine:
        self._count += 1
        log = self.logs_dir / f"{self._count:02d}-{kind}-{_slug(name)}.log"
        if kind == "remote":
            return RemoteEngine(model, name=name, request_timeout=self.request_timeout).start()
        cls = OfflineEngine if kind == "offline" else ServerEngine
        engine = cls(model, engine_args, self.interpreter, log, name=name, env=env,
                     start_timeout=self.start_timeout, request_timeout=self.request_timeout)
        return engine.start()

    def note_crash(self, engine: Engine, scenario: str) -> None:
        for entry in self.entries.values():
            if entry.engine is engine and entry.crashed_in is None:
                entry.crashed_in = scenario

    def close_all(self) -> dict[str, list[int]]:
        """Tear every engine down; returns survivors per engine log (must be empty)."""
        survivors = {}
        for entry in list(self.entries.values()):
            left = entry.engine.close()
            survivors[str(entry.engine.log_path or entry.engine.name)] = left
            self.retired.append(entry)
        self.entries.clear()
        return survivors
