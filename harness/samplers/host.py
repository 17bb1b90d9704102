"""HostSampler: summed RSS of the engine's process tree (the CPU tier's
memory figure). Summed RSS counts shared pages once per process, so it
over-states a tree that shares memory; the host leak check therefore uses
the machine's available memory instead (see leak.py)."""
from __future__ import annotations

from dataclasses import asdict

from .base import DEFAULT_RATE_HZ, Sampler
from .process_tree import ProcessTree, SeenProcess

ENGINE_RSS = "engine-rss"


class HostSampler(Sampler):
    name = "host"

    def __init__(self, root_pid: int, rate_hz: float = DEFAULT_RATE_HZ,
                 refresh_interval_s: float = 0.5):
        super().__init__(rate_hz=rate_hz, refresh_interval_s=refresh_interval_s)
        self.tree = ProcessTree(root_pid)
        self._meta["root_pid"] = root_pid

    @property
    def pids_seen(self) -> list[SeenProcess]:
        """Every process that belonged to the tree while sampling: what the
        host leak check needs to prove none survived."""
        return list(self.tree.seen.values())

    def _refresh(self) -> None:
        self.tree.refresh()

    def _read(self) -> dict[str, int]:
        return {ENGINE_RSS: self.tree.rss_bytes()}

    def _close(self) -> None:
        self._meta["pids_seen"] = [asdict(p) for p in self.pids_seen]
        self.tree.close()
