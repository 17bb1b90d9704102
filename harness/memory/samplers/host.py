"""HostSampler: summed RSS of the engine's process tree (the CPU tier's
memory figure). It also notes the shared-memory segments the tree uses,
which outlive it when nobody unlinks them: the host leak check counts the
engine's surviving processes and segments (see leak.py).

Reading the tree's memory maps is the costly part (an engine's five
processes have about 6,000 lines of maps: 11 ms of kernel time), so the maps
are read again only when /dev/shm holds a segment it did not hold at the last
reading, and every SHM_RESCAN_S besides."""
from __future__ import annotations

import time
from dataclasses import asdict

from .base import DEFAULT_RATE_HZ, Sampler
from .process_tree import ProcessTree, SeenProcess
from .shm import existing_segments, segments_used_by

ENGINE_RSS = "engine-rss"
SHM_RESCAN_S = 5.0


class HostSampler(Sampler):
    name = "host"

    def __init__(self, root_pid: int, rate_hz: float = DEFAULT_RATE_HZ,
                 refresh_interval_s: float = 0.5):
        super().__init__(rate_hz=rate_hz, refresh_interval_s=refresh_interval_s)
        self.tree = ProcessTree(root_pid)
        self._meta["root_pid"] = root_pid
        self.shm_seen: set[str] = set()  # "name:inode" of /dev/shm segments the tree used
        self._shm_present: set[str] = set()  # /dev/shm at the last reading of the maps
        self._shm_read_at = float("-inf")

    @property
    def pids_seen(self) -> list[SeenProcess]:
        """Every process that belonged to the tree while sampling: what the
        host leak check needs to prove none survived."""
        return list(self.tree.seen.values())

    def _refresh(self) -> None:
        self.tree.refresh()
        present = existing_segments()
        if present - self._shm_present or time.monotonic() - self._shm_read_at >= SHM_RESCAN_S:
            self._shm_read_at = time.monotonic()
            self.shm_seen |= segments_used_by(self.tree.pids)
        self._shm_present = present

    def _read(self) -> dict[str, int]:
        return {ENGINE_RSS: self.tree.rss_bytes()}

    def _close(self) -> None:
        self.shm_seen |= segments_used_by(self.tree.pids)
        self._meta["pids_seen"] = [asdict(p) for p in self.pids_seen]
        self.tree.close()
