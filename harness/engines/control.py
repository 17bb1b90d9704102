"""Steering an engine between runs, through the in-engine shim's control
file (harness/compat/site/mmharness_memory.py), read at every encoder call:
the memory its memory query answers (an emulated card), and a forced encoder
chunk size, and the size of an injected fault (harness tests only). One
engine serves every setting, so trying five chunk sizes costs five runs, not
five engine starts.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

ENV = "MMHARNESS_CONTROL"


def control_file(log_path: Path) -> Path:
    """Where an engine logging to `log_path` reads its control."""
    return log_path.with_name(log_path.stem + ".control.json")


class EngineControl:
    def __init__(self, path: Path | None):
        self.path = path

    def env(self) -> dict[str, str]:
        return {ENV: str(self.path)} if self.path is not None else {}

    @property
    def available(self) -> bool:
        return self.path is not None

    @contextlib.contextmanager
    def steering(self, *, memory: tuple[int, int] | None = None, chunk: int | None = None,
                 fault_scale: float | None = None):
        """Within the block, the engine's encoder calls see `memory` (free,
        total bytes) from their memory query and use `chunk` items per chunk,
        and its injected leaks have `fault_scale` (harness tests and
        benchmarks only); None leaves the engine's own. Refused where the
        engine cannot be steered."""
        control = {k: v for k, v in (("memory", memory and {"free": memory[0], "total": memory[1]}),
                                     ("chunk", chunk), ("fault_scale", fault_scale)) if v is not None}
        if control and not self.available:
            raise RuntimeError("this engine cannot be steered (no in-engine control file)")
        if not control:
            yield
            return
        self._write(control)
        try:
            yield
        finally:
            self._write({})

    def _write(self, control: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(control))
        os.replace(tmp, self.path)  # the engine never reads half a file
