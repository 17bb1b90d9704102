"""Memory of one engine from ready to teardown: a sampler on its process
tree (NVML on a GPU machine, host RSS otherwise), per-scenario windows, and
the leak check once it is torn down."""
from __future__ import annotations

from harness.memory.nvml import Nvml, nvml_unavailable_reason
from harness.memory.samplers import HostSampler, NvmlSampler, Sampler, SamplerResult
from harness.memory.samplers.leak import (DEFAULT_WAIT_S, LeakVerdict, check_gpu_teardown, check_host_teardown,
                                         gpu_baseline)
from harness.memory.samplers.shm import existing_segments


class MemoryWatch:
    def __init__(self, tier: str, *, own_pids: tuple[int, ...] = (), devices: tuple[int, ...] | None = None,
                 wait_s: float = DEFAULT_WAIT_S):
        # NVML where there is a GPU tier and a driver; the host's RSS otherwise.
        self.gpu = tier == "gpu" and nvml_unavailable_reason() is None
        self.own_pids = own_pids
        # The GPUs the engine was given (NVML indices); None: every device.
        # Others' engines on other GPUs must not move its baseline.
        self.devices = list(devices) if devices is not None else None
        self.wait_s = wait_s  # the leak check's bound on waiting for memory to come back
        # GPU: device used bytes; host: the /dev/shm segments that were there
        # before the engine, so that only those it created count as its own.
        self.baseline: dict[int, int] | set[str] | None = None
        self.sampler: Sampler | None = None
        self.result: SamplerResult | None = None

    def before_start(self) -> None:
        if self.gpu:
            self.baseline = gpu_baseline(self.devices if self.devices is not None else _all_devices())
        else:
            self.baseline = existing_segments()

    def start(self, root_pid: int) -> None:
        self.sampler = (NvmlSampler(root_pid, own_pids=self.own_pids, devices=self.devices) if self.gpu
                        else HostSampler(root_pid)).start()

    def now(self) -> float:
        return self.sampler.now() if self.sampler else 0.0

    def window(self, t0: float) -> SamplerResult | None:
        if self.sampler is None:
            return None
        return self.sampler.window(t0, self.sampler.now())

    def stop(self) -> None:
        if self.sampler is not None and self.sampler.running:
            self.result = self.sampler.stop()

    def leak_check(self, uses: list[str]) -> LeakVerdict | None:
        """After the engine is torn down. None when nothing was watched. On a
        GPU the baseline alone is enough: an engine that failed to start
        must give its memory back too."""
        if self.baseline is None or (self.sampler is None and not self.gpu):
            return None
        processes = getattr(self.sampler, "pids_seen", [])
        if self.gpu:
            return check_gpu_teardown(self.baseline, uses=uses, engine_processes=processes,
                                      timeout_s=self.wait_s)
        created = getattr(self.sampler, "shm_seen", set()) - self.baseline
        return check_host_teardown(processes, created, uses=uses, timeout_s=self.wait_s)


def _all_devices() -> list[int]:
    nvml = Nvml()
    try:
        return list(range(nvml.device_count()))
    finally:
        nvml.close()
