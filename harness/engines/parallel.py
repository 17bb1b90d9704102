"""Where a tensor-parallel engine runs, or why this machine cannot host it.

GPU tier: TP n needs n GPUs. CPU tier: vLLM's CPU backend runs one rank per
OpenMP thread group, and `VLLM_CPU_OMP_THREADS_BIND` gives each rank its
cores. Every rank computes on one core ("0" at TP 1, "0|1" for two ranks):
the number of threads changes how a GEMM splits its sums, and so the
answers (benchmarks/measure_binding_noise.py: an engine on two threads
against one moved logprobs by 14.6 bf16 steps on an AMX host, and by 5 at
avx512-bf16, where one thread is batch-exact), so every engine of the tier
computes alike on any machine, and a noise profile holds on any machine of
its host kind. With fewer cores than ranks, ranks share cores in turn
("0|1|0|1": measured to run TP 4 on 2 cores, slowly). Either way the
model's attention heads must split evenly across the ranks.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

TP_ARG = "tensor_parallel_size"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


class NotHostable(Exception):
    """This machine cannot run the engine at this TP size; says why."""


def tensor_parallel(engine_args: dict) -> int:
    return int(engine_args.get(TP_ARG, 1))


def placement(tp: int, tier: str, *, cores: list[int] | None = None,
              gpus: int | None = None) -> dict[str, str]:
    """The engine's environment for TP `tp` on this tier's machine: on the
    CPU tier a core per rank; raises NotHostable when a GPU machine has too
    few GPUs."""
    if tier == "gpu":
        if tp == 1:
            return {}
        count = gpus if gpus is not None else gpu_count()
        if count < tp:
            raise NotHostable(f"TP {tp} needs {tp} GPUs; this machine has {count}")
        return {}
    if tp == 1 and cores is None and os.environ.get(BIND_ENV):  # the caller's choice (a test worker's core)
        return {BIND_ENV: os.environ[BIND_ENV]}
    cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
    return {BIND_ENV: "|".join(str(cores[i % len(cores)]) for i in range(tp))}


def heads_divide(model_dir: str | Path, tp: int) -> None:
    """Raises NotHostable when a local checkpoint's attention heads do not
    split evenly over `tp` ranks (the engine would refuse it at start-up)."""
    config = Path(model_dir) / "config.json"
    if tp == 1 or not config.is_file():
        return
    text = json.loads(config.read_text()).get("text_config", {})
    heads = text.get("num_attention_heads")
    if heads and heads % tp:
        raise NotHostable(f"TP {tp} needs attention heads divisible by {tp}; this build has {heads}")


def gpu_count() -> int:
    from harness.memory.nvml import Nvml, NvmlUnavailable

    try:
        with Nvml() as nvml:
            return nvml.device_count()
    except NvmlUnavailable:
        return 0
