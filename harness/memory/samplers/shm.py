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
import re
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
            paths.update(_mapped(pid, prefix))
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


def _mapped(pid: int, prefix: str) -> list[str]:
    """Paths under prefix in the process's memory map. The map is read in a
    few large reads and searched as bytes: each read holds the process's
    mmap lock, so a short reader stalls the engine least."""
    fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    # a whole line's path under prefix, unless the kernel marks it deleted
    pattern = re.escape(prefix.encode()) + rb"[^\n]*(?<! \(deleted\))(?=\n|$)"
    return [m.decode("utf-8", "replace") for m in re.findall(pattern, b"".join(chunks))]


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
