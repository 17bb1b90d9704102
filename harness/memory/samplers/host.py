"""HostSampler: summed RSS of the engine's process tree (the CPU tier's
memory figure). It also notes the shared-memory segments the tree uses,
which outlive it when nobody unlinks them: the host leak check counts the
engine's surviving processes and segments (see leak.py)."""
from __future__ import annotations

from dataclasses import asdict

from .base import DEFAULT_RATE_HZ, Sampler
from .process_tree import ProcessTree, SeenProcess
from .shm import segments_used_by

ENGINE_RSS = "engine-rss"


class HostSampler(Sampler):
    name = "host"

    def __init__(self, root_pid: int, rate_hz: float = DEFAULT_RATE_HZ,
                 refresh_interval_s: float = 0.5):
        super().__init__(rate_hz=rate_hz, refresh_interval_s=refresh_interval_s)
        self.tree = ProcessTree(root_pid)
        self._meta["root_pid"] = root_pid
        self.shm_seen: set[str] = set()  # "name:inode" of /dev/shm segments the tree used

    @property
    def pids_seen(self) -> list[SeenProcess]:
        """Every process that belonged to the tree while sampling: what the
        host leak check needs to prove none survived."""
        return list(self.tree.seen.values())

    def _refresh(self) -> None:
        self.tree.refresh()
        self.shm_seen |= segments_used_by(self.tree.pids)

    def _read(self) -> dict[str, int]:
        return {ENGINE_RSS: self.tree.rss_bytes()}

    def _close(self) -> None:
        self.shm_seen |= segments_used_by(self.tree.pids)
        self._meta["pids_seen"] = [asdict(p) for p in self.pids_seen]
        self.tree.close()
