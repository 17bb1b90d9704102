"""Every engine process's Python stacks at one moment, for a hang's record.

The start-up shim (harness/compat/site/mmharness_stacks.py) registers
faulthandler on SIGUSR2 in each engine process, writing to a file of its
own in the engine's stacks folder. Only a process with such a file is sent
the signal: one without a handler would die of it.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ENV = "MMHARNESS_STACKS"
SIGNAL = signal.SIGUSR2
# How long the dump waits for the processes' files to stop growing.
WAIT_S = 3.0
SETTLE_S = 0.3
MAX_CHARS = 20_000


def stacks_folder(log_path: Path) -> Path:
    """Where an engine logging to `log_path` writes its processes' stacks."""
    return log_path.with_name(log_path.stem + ".stacks")


class StackDumps:
    def __init__(self, folder: Path | None):
        self.folder = folder

    def env(self) -> dict[str, str]:
        if self.folder is None:
            return {}
        self.folder.mkdir(parents=True, exist_ok=True)
        return {ENV: str(self.folder)}

    def _file(self, pid: int) -> Path:
        return self.folder / f"stacks-{pid}.txt"

    def dump(self, processes: dict[int, str]) -> dict[str, dict]:
        """{pid: {"process": name, "stacks": text}} for each of `processes`
        (pid -> name) armed with the dumper; one that is not says so."""
        if self.folder is None:
            return {}
        sizes, out = {}, {}
        for pid, name in processes.items():
            path = self._file(pid)
            if not path.exists():
                out[str(pid)] = {"process": name, "stacks": "(no stack dumper in this process)"}
                continue
            sizes[pid] = path.stat().st_size
            try:
                os.kill(pid, SIGNAL)
            except ProcessLookupError:
                out[str(pid)] = {"process": name, "stacks": "(gone before its stacks were asked for)"}
                sizes.pop(pid)
        self._wait(sizes)
        for pid, start in sizes.items():
            with open(self._file(pid), "rb") as f:
                f.seek(start)
                text = f.read().decode("utf-8", "replace")
            out[str(pid)] = {"process": processes[pid], "stacks": text[-MAX_CHARS:] or "(no answer to SIGUSR2)"}
        return out

    def _wait(self, sizes: dict[int, int]) -> None:
        """Until every file has grown and none grew for SETTLE_S, or WAIT_S."""
        deadline, last, still_since = time.monotonic() + WAIT_S, None, time.monotonic()
        while time.monotonic() < deadline:
            now = {pid: self._file(pid).stat().st_size for pid in sizes}
            if now != last:
                last, still_since = now, time.monotonic()
            elif all(now[p] > sizes[p] for p in sizes) and time.monotonic() - still_since >= SETTLE_S:
                return
            time.sleep(0.05)
