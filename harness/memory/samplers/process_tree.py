"""The engine's process tree: membership refreshed now and then, RSS read
cheaply every tick.

Walking the tree with psutil's children(recursive=True) scans all of /proc
(about 1-3 ms); at 100 Hz that alone costs a large share of a core. So the
walk runs only on refresh(), using /proc/<pid>/task/<tid>/children where the
kernel has it, and each tick re-reads an already open /proc/<pid>/statm with
one pread (well under a microsecond of kernel time per process). An open
/proc/<pid> file stays bound to that process, so a recycled pid can never be
read by mistake. Off Linux, psutil does both jobs. The walk and the reads run
on different threads: membership changes under a lock, the walk outside it.
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

import psutil

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_HAVE_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc/self")


@dataclass(frozen=True)
class SeenProcess:
    pid: int
    create_time: float
    name: str


def _proc_children(pid: int) -> list[int] | None:
    """Direct children from /proc, or None if the kernel lacks the file."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    kids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                kids.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread exited meanwhile
            return None  # the kernel has no children file (CONFIG_PROC_CHILDREN off)
        except (ProcessLookupError, PermissionError):
            continue
    return kids


def descendants(root: int) -> list[int]:
    """Every descendant's pid: /proc's children files, else psutil's scan of all /proc."""
    if _HAVE_PROC:
        found, stack = [], [root]
        while stack:
            kids = _proc_children(stack.pop())
            if kids is None:
                break
            found.extend(kids)
            stack.extend(kids)
        else:
            return found
    try:
        return [p.pid for p in psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return []


class ProcessTree:
    """Root pid plus descendants. `refresh()` updates who belongs;
    `rss_bytes()` sums resident memory of the current members."""

    def __init__(self, root_pid: int):
        if not psutil.pid_exists(root_pid):
            raise ValueError(f"no process with pid {root_pid}")
        self.root_pid = root_pid
        self._fds: dict[int, int | psutil.Process] = {}  # pid -> statm fd, or a psutil handle off Linux
        self._lock = threading.Lock()  # held while the members change or are read, never during the walk
        # every process that was ever a member, keyed by (pid, create_time)
        # because a pid can be recycled by an unrelated process
        self.seen: dict[tuple[int, float], SeenProcess] = {}

    @property
    def pids(self) -> set[int]:
        with self._lock:
            return set(self._fds)

    def refresh(self) -> None:
        current = {self.root_pid, *descendants(self.root_pid)} if psutil.pid_exists(self.root_pid) else set()
        adopted = {pid: handle for pid in current - self.pids if (handle := self._open(pid)) is not None}
        with self._lock:
            for pid in set(self._fds) - current:
                self._forget(pid)
            self._fds.update(adopted)

    def rss_bytes(self) -> int:
        with self._lock:
            return self._rss_bytes()

    def _rss_bytes(self) -> int:
        total = 0
        for pid, handle in self._fds.items():
            if isinstance(handle, int):
                try:
                    # statm: size resident shared text lib data dt, in pages
                    fields = os.pread(handle, 128, 0).split()
                except OSError:  # the process is gone; refresh() will drop it
                    continue
                if len(fields) > 1:
                    total += int(fields[1]) * _PAGE_SIZE
            else:
                try:
                    total += handle.memory_info().rss
                except psutil.Error:
                    continue
        return total

    def close(self) -> None:
        with self._lock:
            for pid in list(self._fds):
                self._forget(pid)

    def _open(self, pid: int) -> int | psutil.Process | None:
        """A new member's handle, noted as seen; None if it exited meanwhile."""
        try:
            proc = psutil.Process(pid)
            seen = SeenProcess(pid, proc.create_time(), proc.name())
            handle = os.open(f"/proc/{pid}/statm", os.O_RDONLY) if _HAVE_PROC else proc
        except (psutil.Error, OSError):
            return None  # exited between the walk and now
        self.seen.setdefault((pid, seen.create_time), seen)
        return handle

    def _forget(self, pid: int) -> None:
        handle = self._fds.pop(pid)
        if isinstance(handle, int):
            os.close(handle)
