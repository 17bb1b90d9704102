"""Fixtures for the harness's own tests."""
import os
from types import SimpleNamespace

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.engines.parallel import BIND_ENV
from harness.models import models_for


def pytest_configure(config):
    """Under xdist, each worker's engines compute on a core of their own.
    Left to vLLM's default, an engine binds its compute threads to the first
    core and keeps the next for its front end, so two workers' engines
    shared one core: two concurrent runs of test_engines_offline.py took
    about a fifth longer so than bound one core each. A TP
    size above 1 gets its own binding from the runner (placement)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and BIND_ENV not in os.environ:
        cores = sorted(os.sched_getaffinity(0))
        os.environ[BIND_ENV] = str(cores[int(worker[2:]) % len(cores)])


def pytest_collection_modifyitems(config, items):
    """The longest files first: those with fault runs (a scenario family per
    fault), then those that start engines, then the quick ones. On xdist
    workers (`make test`: --dist loadfile --no-loadscope-reorder, else xdist
    orders files by their number of tests) the last files handed out are
    then short, and neither worker waits long for the other at the end."""
    marked = {name: {item.path for item in items if item.get_closest_marker(name)} for name in ("mutation", "engine")}
    items.sort(key=lambda item: (item.path not in marked["mutation"], item.path not in marked["engine"]))


@pytest.fixture(scope="session")
def interpreter() -> EngineInterpreter:
    return EngineInterpreter()


@pytest.fixture(scope="session")
def tiny_gemma4(interpreter):
    """(model dir, engine args) of the CPU tier's tiny Gemma4."""
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    return interpreter.build_tiny_model("gemma4"), entry.engine_args


class FakeNvmlError(Exception):
    pass


def _fake_nvml(used: list[int] | dict[int, list[int]], processes: dict[int, int | None], *, devices: int = 1,
               total: int = 80 << 30, has_v2: bool = True):
    """A stand-in pynvml module; `used` is consumed per memory call (the
    last value repeats), one list for all devices or one per device index;
    `calls` counts the v2 and v1 memory queries."""
    calls = {"v2": 0, "v1": 0}

    def memory_info(handle, version=None):
        series = used[int(handle.removeprefix("handle"))] if isinstance(used, dict) else used
        value = series.pop(0) if len(series) > 1 else series[0]
        if version is not None:
            if not has_v2:
                raise FakeNvmlError("Function Not Found")
            calls["v2"] += 1
            return SimpleNamespace(total=total, reserved=300 << 20, free=total - value, used=value)
        calls["v1"] += 1
        return SimpleNamespace(total=total, free=total - value, used=value)

    return SimpleNamespace(
        NVMLError=FakeNvmlError, nvmlMemory_v2=0x02000028, calls=calls,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: devices,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}", nvmlDeviceGetMemoryInfo=memory_info,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in processes.items()],
    )


@pytest.fixture
def fake_nvml():
    """Makes stand-in pynvml modules, to drive the NVML arithmetic without a GPU:
    fake_nvml(used, {pid: bytes}, devices=1, total=80 GiB, has_v2=True)."""
    return _fake_nvml
