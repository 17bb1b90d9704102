"""GPU check of what `make nightly` and preflight read from a real GPU
machine, in seconds: `make nightly` starts one xdist worker per GPU the
scheduler will use, and preflight's free-memory check reads the run's real
GPUs (a share no GPU has free is named, one every GPU has passes).

    tests/gpu/check
"""
from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.engines.devices import run_devices
from harness.memory.nvml import nvml_unavailable_reason
from harness.models import models_for
from harness.preflight.devices import gpu_problems

ROOT = Path(__file__).resolve().parents[2]
_REASON = nvml_unavailable_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


def test_make_nightly_runs_one_worker_per_gpu_of_the_run():
    printed = subprocess.run(["make", "-n", "-o", "setup", "nightly"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60).stdout
    assert f"-n {len(run_devices())} --dist loadscope" in printed, printed


def test_preflight_reads_the_free_memory_of_the_runs_gpus():
    [entry] = [e for e in models_for("gpu") if e.name == "gemma-4-e2b"]
    nothing = replace(entry, per_family={"f": {"gpu_memory_utilization": 0.0}})
    assert gpu_problems((nothing,), families=("f",)) == []
    too_much = replace(entry, per_family={"f": {"gpu_memory_utilization": 1.01}})
    [problem] = gpu_problems((too_much,), families=("f",))
    assert "1.01 of the device" in problem and f"GPU {run_devices()[0]}:" in problem
