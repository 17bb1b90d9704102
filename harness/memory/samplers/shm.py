"""Shared-memory segments an engine created in /dev/shm (vLLM's message
queues are `psm_*` files, from multiprocessing.shared_memory).

A segment outlives every process when nobody unlinks it, so the host leak
check counts the engine's own segments: those its processes had mapped or
open while it ran, that were not there before it started. Their size is the
memory actually allocated (a segment is sparse: a 160 MiB psm_ file may hold
a few KiB).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

SHM_DIR = Path("/dev/shm")


def existing_segments(shm_dir: Path = SHM_DIR) -> set[str]:
    """Names in /dev/shm now, as "name:inode" (a name reused later is another segment)."""
    try:
        return {f"{e.name}:{e.inode()}" for e in os.scandir(shm_dir)}
    except OSError:
        return set()


def segments_used_by(pids: Iterable[int], shm_dir: Path = SHM_DIR) -> set[str]:
    """Segments under shm_dir that these processes map or hold open, as "name:inode"."""
    prefix = str(shm_dir) + "/"
    paths: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                for line in f:
                    at = line.find(prefix.encode())
                    if at >= 0 and not line.rstrip().endswith(b"(deleted)"):
                        paths.add(line[at:].rstrip().decode("utf-8", "replace"))
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix) and not target.endswith("(deleted)"):
                paths.add(target)
    named = set()
    for path in paths:
        try:
            named.add(f"{Path(path).name}:{os.stat(path).st_ino}")
        except OSError:
            continue
    return named


def held_bytes(segments: Iterable[str], shm_dir: Path = SHM_DIR) -> dict[str, int]:
    """Allocated bytes of each segment still present (same name and inode)."""
    held = {}
    for segment in segments:
        name, _, inode = segment.rpartition(":")
        try:
            st = os.stat(shm_dir / name)
        except OSError:
            continue
        if str(st.st_ino) == inode:
            held[name] = st.st_blocks * 512
    return held
