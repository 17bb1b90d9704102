"""A reference engine in one process (harness.engines.parallel): the runner
asks for it for TP 1 references on the CPU tier only, the pool gives it the
threads vLLM's executor would give its worker, and its answers are
bit-identical to the default layout's, media and batches included."""
from __future__ import annotations

import dataclasses
import os

import pytest

from harness.cache.workload import cache_workload
from harness.engines.base import Sampling
from harness.engines.faults import fault_env
from harness.engines.outcomes import Completion, EngineCrashed, Rejected
from harness.engines.parallel import BIND_ENV, IN_PROCESS_ENV, reference_layout, threads_in_process
from harness.engines.pool import EnginePool
from harness.models import ModelEntry, models_for
from harness.runner import Runner
from harness.verdicts import Cause
from harness.workloads import audio
from harness.workloads.chat import image_part, user

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)


def _runner(pool, entry: ModelEntry, model: str = "org/m") -> Runner:
    return Runner(entry, model, "test_cache_consistency", pool, on_engine=lambda e: None)


def test_one_process_for_tp1_references_on_the_cpu_tier_only(interpreter, tmp_path):
    assert reference_layout("cpu", 1) == {IN_PROCESS_ENV: "0"}
    assert reference_layout("cpu", 2) == {} and reference_layout("gpu", 1) == {}
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    runner = _runner(EnginePool(interpreter, tmp_path, watch_memory=False), entry)
    assert runner.spec_of("reference", None).env[IN_PROCESS_ENV] == "0"
    assert IN_PROCESS_ENV not in runner.spec_of("offline", None).env  # the engine under test: users' layout
    assert IN_PROCESS_ENV not in runner.spec_of("reference", {"tensor_parallel_size": 2}).env


def test_threads_in_one_process_are_those_of_the_executors_worker():
    assert threads_in_process({IN_PROCESS_ENV: "0", BIND_ENV: "1"}) == {
        "OMP_NUM_THREADS": "1", "OMP_PLACES": "{1}", "OMP_PROC_BIND": "true"}
    assert threads_in_process({IN_PROCESS_ENV: "0", BIND_ENV: "0,2-3"})["OMP_PLACES"] == "{0,2,3}"
    assert threads_in_process({BIND_ENV: "0"}) == {}  # the default layout: vLLM's executor binds
    with pytest.raises(ValueError, match="several"):
        threads_in_process({IN_PROCESS_ENV: "0", BIND_ENV: "0|1"})


def _answers(handle, work) -> list[tuple]:
    engine = handle.engine
    alone = [engine.chat([r.conversation], SAMPLING)[0] for r in work.requests]
    together = engine.chat([r.conversation for r in work.requests], SAMPLING)
    outcomes = alone + together
    assert all(isinstance(o, Completion) for o in outcomes), outcomes
    return [(o.token_ids, o.logprobs) for o in outcomes]


@pytest.mark.engine
def test_a_reference_in_one_process_answers_bit_identically_to_the_default_layout(interpreter, tmp_path):
    """Both engines through the runner's spec and the pool, as a run starts
    them: each request alone, then all in one batch (images, a 3 s clip and
    ragged clips), greedy with the top-5 logprobs at every position."""
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    model = str(interpreter.build_tiny_model("gemma4"))
    pool = EnginePool(interpreter, tmp_path / "engines", watch_memory=False)
    runner = _runner(pool, entry, model)
    one_process = runner.spec_of("reference", None)
    default = dataclasses.replace(one_process, env={k: v for k, v in one_process.env.items() if k != IN_PROCESS_ENV})
    work = cache_workload(entry.modalities, 3.0)
    work = dataclasses.replace(work, requests=work.requests + audio.clip_workload("ragged", [1.0, 2.5]).requests)
    answers, processes = {}, {}
    try:
        for name, spec in (("default", default), ("one process", one_process)):
            handle = pool.get(spec, label=f"layout-{name}")
            processes[name] = handle.engine.proc.vital
            answers[name] = _answers(handle, work)
            processes[name + " cores"] = os.sched_getaffinity(handle.engine.proc.pid)
    finally:
        survivors = pool.close_all()
    assert not any(survivors.values()), survivors
    # The premises: the layouts differ as declared (front end, engine core
    # and worker; one process bound to the binding's core).
    assert len(processes["default"]) >= 3 and len(processes["one process"]) == 1, processes
    assert processes["one process cores"] == {int(one_process.env[BIND_ENV])}, processes
    assert answers["one process"] == answers["default"]


@pytest.mark.engine
def test_an_exception_in_a_step_in_one_process_is_the_engines_death(interpreter, tmp_path):
    """In the default layout an exception in the engine core's step kills the
    core's process; in one process it reaches the worker from
    wait_for_completion, and must be the same verdict: the engine died, of
    that exception (not a refusal of the input). A bad input is still a
    refusal, and the engine survives it."""
    entry = next(e for e in models_for("cpu") if e.tiny_arch == "gemma4")
    model = str(interpreter.build_tiny_model("gemma4"))
    pool = EnginePool(interpreter, tmp_path / "engines", watch_memory=False)
    spec = _runner(pool, entry, model).spec_of("reference", None)
    spec = dataclasses.replace(spec, env={**spec.env, **fault_env("raise-ragged-audio")})
    try:
        engine = pool.get(spec, label="one-process-fault").engine
        [refused] = engine.chat([user(image_part(b"not an image", "image/png"), "Describe.")], SAMPLING)
        assert isinstance(refused, Rejected), refused
        ragged = audio.clip_workload("ragged", [1.0, 2.5])
        crashed = engine.chat([r.conversation for r in ragged.requests], SAMPLING)
    finally:
        survivors = pool.close_all()
    assert not any(survivors.values()), survivors
    assert all(isinstance(c, EngineCrashed) for c in crashed), crashed
    assert crashed[0].cause.kind is Cause.PYTHON_EXCEPTION, crashed[0]
    assert "RuntimeError: mmharness fault: ragged audio batch" in str(crashed[0].cause), crashed[0]
