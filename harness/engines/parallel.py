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

A reference engine of TP 1 on the CPU tier runs in one process
(`reference_layout`): vLLM's engine core and its model worker in the
engine's own process, where the default layout spawns two more processes,
each importing vLLM (benchmarks/bench_engines.py prints both starts). The layout is a numeric path
only through its threads: the multiprocessing executor gives the worker
`OMP_NUM_THREADS` and `OMP_PLACES` from the binding
(vllm.utils.ompmultiprocessing), and in one process nothing does, so the
harness sets the same (`threads_in_process`).
tests/test_reference_layout.py holds that its answers are bit-identical to
the default layout's. The engine under test keeps the layout users run.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

TP_ARG = "tensor_parallel_size"
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
IN_PROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"


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


def reference_layout(tier: str, tp: int) -> dict[str, str]:
    """A reference engine's layout: one process on the CPU tier at TP 1
    (ranks need the multiprocessing executor); the default elsewhere."""
    return {IN_PROCESS_ENV: "0"} if tier == "cpu" and tp == 1 else {}


def threads_in_process(env: dict[str, str]) -> dict[str, str]:
    """For an engine in one process (`reference_layout`), the OpenMP
    settings vLLM's executor gives its worker for the binding in `env`
    (one rank); nothing for any other engine."""
    if env.get(IN_PROCESS_ENV) != "0" or not env.get(BIND_ENV):
        return {}
    cores = _core_ids(env[BIND_ENV])
    return {"OMP_NUM_THREADS": str(len(cores)), "OMP_PLACES": "{" + ",".join(map(str, cores)) + "}",
            "OMP_PROC_BIND": "true"}


def _core_ids(binding: str) -> list[int]:
    """ "0", "2,3" or "0-3" as core ids (one rank's binding)."""
    if "|" in binding:
        raise ValueError(f"one process computes as one rank; {BIND_ENV}={binding!r} names several")
    cores: list[int] = []
    for part in binding.split(","):
        first, _, last = part.partition("-")
        cores.extend(range(int(first), int(last or first) + 1))
    return cores


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
