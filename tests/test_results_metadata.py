"""Run metadata from the host: what is always there, and the GPUs via NVML."""
from __future__ import annotations

import platform
import subprocess
import sys
import types
from pathlib import Path

from harness.results.metadata import collect_host_metadata, gpus, merge_reported

REPO = Path(__file__).resolve().parents[1]


def test_host_metadata_names_python_git_cpu_and_gpus(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    meta = collect_host_metadata(REPO)
    assert meta["python"] == platform.python_version()
    assert meta["harness_git_sha"] == subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                                     capture_output=True, text=True).stdout.strip()
    assert meta["cpu_model"]
    assert [g["name"] for g in meta["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]


def _fake_nvml(fail_at=None):
    class NVMLError(Exception):
        pass

    def call(name, value):
        def f(*args):
            if name == fail_at:
                raise NVMLError(f"{name} failed")
            return value
        return f
    module = types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=call("init", None), nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=call("driver", b"550.54.15"),
        nvmlDeviceGetCount=call("count", 2), nvmlDeviceGetHandleByIndex=call("handle", object()),
        nvmlDeviceGetName=call("name", "NVIDIA H200"),
        nvmlDeviceGetMemoryInfo=call("memory", types.SimpleNamespace(total=150_000_000_000, used=1 << 30,
                                                                           free=150_000_000_000 - (1 << 30))))
    return module


def test_gpus_read_through_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml())
    assert gpus() == [{"index": i, "name": "NVIDIA H200", "driver": "550.54.15",
                       "memory_bytes": 150_000_000_000} for i in range(2)]


def test_no_driver_means_no_gpus_and_a_failing_query_is_said(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(fail_at="init"))
    assert gpus() == []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(fail_at="memory"))
    assert gpus() == [{"error": "NVML: memory failed"}]


def test_merge_reported_keeps_disagreements():
    assert merge_reported([{"engine": "vllm", "device": "cpu"}, {"engine": "vllm", "device": "cuda"}]) == {
        "engine": "vllm", "device": ["cpu", "cuda"]}
