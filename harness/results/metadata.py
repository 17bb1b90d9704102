"""What a run ran on: the harness, the interpreter and the machine.

Engine identity (distribution, version, the torch it runs, the device) is
not guessed here: the engine runs in its own interpreter, so the engine
fixtures report it through the `pytest_mmharness_run_metadata` hook.
"""
from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from harness.memory.nvml import Nvml, NvmlUnavailable
from harness.setup.cpu_features import cpu_identity, isa_features


def collect_host_metadata(repo: Path) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "harness_torch": _distribution_version("torch"),
        "harness_git_sha": _git(repo, "rev-parse", "HEAD"),
        "harness_git_dirty": bool(_git(repo, "status", "--porcelain", "--untracked-files=no")),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        # What decides the CPU engine's kernels (harness.setup.cpu_features).
        "cpu": cpu_identity(),
        "isa": isa_features(),
        "gpus": gpus(),
    }


def merge_reported(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold what each worker reported into one dict. Workers that disagree
    (two engine versions in one run) keep every value, so the report shows
    the disagreement instead of hiding one side."""
    seen: dict[str, list[Any]] = {}
    for report in reports:
        for key, value in report.items():
            values = seen.setdefault(key, [])
            if value not in values:
                values.append(value)
    return {key: values[0] if len(values) == 1 else values for key, values in seen.items()}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[dict[str, Any]]:
    """Name, driver and memory of each NVIDIA GPU; empty where there is no
    NVML binding or no driver."""
    try:
        nvml = Nvml()
    except NvmlUnavailable:
        return []
    try:
        driver = nvml.driver_version()
        return [{"index": index, "name": nvml.name(index), "driver": driver,
                 "memory_bytes": nvml.memory(index).total}
                for index in range(nvml.device_count())]
    except nvml.nvml.NVMLError as exc:
        return [{"error": f"NVML: {exc}"}]
    finally:
        nvml.close()


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None

