"""Driving a soak: waves of the mix's requests, streamed to the server one
wave after another for the time budget, each wave released together. After
each wave the resident memory of every engine process is read, so memory
is a series over requests served: each process's resident memory and, on
a GPU, each process's device memory as NVML lists it. The first crash or
hang ends the soak: what came before it is kept."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import psutil

from harness.engines.base import Sampling
from harness.engines.outcomes import Completion, EngineCrashed, Result
from harness.memory.nvml import Nvml
from harness.soak.latency import Timing
from harness.soak.load import SoakMix
from harness.workloads.request import Workload

MIB = 2**20


@dataclass(frozen=True)
class Wave:
    index: int
    workload: Workload
    sent_s: float  # from the soak's start
    outcomes: list[Result]


@dataclass(frozen=True)
class Reading:
    """Memory per engine process (MiB) once `requests` were answered: its
    resident memory under the process's name, its device memory under
    `gpu <name>`."""
    requests: int
    t_s: float
    mib: dict[str, float]


@dataclass
class Soak:
    seconds: float  # the budget
    waves: list[Wave] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    stopped: EngineCrashed | None = None  # what ended it before its time
    elapsed_s: float = 0.0
    use: object = None  # the runner's EngineUse of the server (harness.runner)

    @property
    def requests(self) -> int:
        return sum(len(w.outcomes) for w in self.waves)

    def after_warmup(self, warmup_requests: int) -> list[Wave]:
        """The waves sent once `warmup_requests` had been sent before them."""
        served, after = 0, []
        for wave in self.waves:
            if served >= warmup_requests:
                after.append(wave)
            served += len(wave.outcomes)
        return after

    def sampled(self, warmup_requests: int, slices: int) -> list[int]:
        """The waves judged against references: after the warm-up, the first
        wave sent in each of `slices` equal timeslices of the rest (fewer
        where a slice sent none)."""
        after = self.after_warmup(warmup_requests)
        if not after:
            return []
        t0, t1 = after[0].sent_s, after[-1].sent_s + 1e-9
        width = (t1 - t0) / slices
        picked = {}
        for wave in after:
            picked.setdefault(min(slices - 1, int((wave.sent_s - t0) / width)), wave.index)
        return sorted(picked.values())

    def timings(self) -> list[Timing]:
        out = []
        for wave in self.waves:
            for r in wave.outcomes:
                ok = isinstance(r, Completion) and r.e2e_s is not None
                out.append(Timing(sent_s=wave.sent_s, e2e_s=r.e2e_s if ok else 0.0,
                                  ttft_s=r.ttft_s if ok else None,
                                  tokens=len(r.token_ids) if ok else 0, ok=ok))
        return out


def _labels(engine) -> dict[int, str]:
    """The engine's processes, named as the engine named them when it became
    ready (the leader: the API server)."""
    return {pid: "api-server" if pid == engine.proc.pid else f"{name}[{pid}]"
            for pid, name in engine.proc.vital.items()}


def process_rss(engine) -> dict[str, float]:
    """MiB resident per live process of the engine."""
    out = {}
    for pid, label in _labels(engine).items():
        try:
            out[label] = engine.proc.seen.get(pid, psutil.Process(pid)).memory_info().rss / MIB
        except psutil.NoSuchProcess:
            continue
    return out


def process_gpu(engine, nvml, devices) -> dict[str, float]:
    """MiB of device memory per process of the engine that NVML lists on
    `devices` (summed over them), as `gpu <name>`. A process NVML does not
    list (another PID namespace, or no memory there) has no figure."""
    labels, out = _labels(engine), {}
    for index in devices:
        for pid, used in nvml.processes(index).items():
            if pid in labels and used is not None:
                key = f"gpu {labels[pid]}"
                out[key] = out.get(key, 0.0) + used / MIB
    return out


@contextmanager
def gpu_reader(engine, devices: list[int] | None):
    """`process_gpu` of the engine on its devices (None: every device), over
    one NVML session."""
    nvml = Nvml()
    try:
        on = devices if devices is not None else list(range(nvml.device_count()))
        yield lambda: process_gpu(engine, nvml, on)
    finally:
        nvml.close()


def drive(engine, mix: SoakMix, sampling: Sampling, seconds: float, *,
          gpu: Callable[[], dict[str, float]] | None = None) -> Soak:
    """Waves until `seconds` have passed (a wave begun in time is finished).
    `gpu`: the engine's device memory per process, read after each wave
    beside the host's (the GPU tier)."""
    soak = Soak(seconds=seconds)
    start = time.monotonic()
    served = 0
    while time.monotonic() - start < seconds:
        workload = mix.wave(len(soak.waves))
        sent_s = time.monotonic() - start
        outcomes = engine.chat_streamed([r.conversation for r in workload.requests], sampling,
                                        adapters=workload.adapters)
        soak.waves.append(Wave(len(soak.waves), workload, sent_s, outcomes))
        served += len(outcomes)
        crash = next((r for r in outcomes if isinstance(r, EngineCrashed)), None)
        if crash is not None:
            soak.stopped = crash
            break
        soak.readings.append(Reading(served, time.monotonic() - start,
                                     process_rss(engine) | (gpu() if gpu else {})))
    soak.elapsed_s = time.monotonic() - start
    return soak
