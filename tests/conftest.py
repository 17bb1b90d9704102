"""Fixtures for the harness's own tests."""
from types import SimpleNamespace

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.models import models_for


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


@pytest.fixture(scope="module")
def offline_gemma4(tiny_gemma4, interpreter, tmp_path_factory):
    """A started offline engine on the tiny Gemma4, one per test module; its
    teardown must leave no process behind."""
    model, args = tiny_gemma4
    engine = OfflineEngine(model, args, interpreter, tmp_path_factory.mktemp("offline") / "engine.log")
    engine.start()
    yield engine
    assert engine.close() == []
