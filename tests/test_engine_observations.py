"""The in-engine observer on the real CPU engine: what the engine really
scheduled and encoded, written by its own processes; a ragged offline batch
is one step and one audio encoder call; no variable, no observer."""
import subprocess

import pytest

from harness.engines.base import Sampling
from harness.engines.outcomes import Completion
from harness.workloads import audio
from tests.observed_events import feature_frames

pytestmark = pytest.mark.engine

RAGGED_S = [1.0, 3.5, 7.0, 12.0]


def steps(events):
    return [e for e in events if e["event"] == "step"]


def audio_calls(events):
    return [e for e in events if e["event"] == "encoder" and e["modality"] == "audio"]


@pytest.fixture(scope="module")
def engine(offline_gemma4):
    return offline_gemma4


def test_observations_sit_beside_the_log_and_start_empty(engine):
    assert engine.observations.path == engine.log_path.with_name("engine.observe.jsonl")
    assert engine.observations.available


def test_ragged_batch_is_one_step_and_one_audio_encoder_call(engine, tiny_gemma4):
    work = audio.clip_workload("ragged", RAGGED_S)
    frames = [feature_frames(str(tiny_gemma4[0]), r.source) for r in work.requests]
    assert len(set(frames)) == 4  # the premise: four different lengths
    offset = engine.observations.mark()
    results = engine.chat([r.conversation for r in work.requests], Sampling(max_tokens=4))
    assert all(isinstance(r, Completion) for r in results), results
    events = engine.observations.since(offset)

    [call] = audio_calls(events)
    assert call["items"] == 4
    assert sorted(s[0] for s in call["shapes"]) == sorted(frames)
    first = steps(events)[0]
    assert first["requests"] == 4
    # The whole prompt of each request in that one step: no request came late.
    assert sorted(first["tokens"].values()) == sorted(r.prompt_token_count for r in results)
    assert first["total_tokens"] == sum(r.prompt_token_count for r in results)
    # Then one decode step per further token, all four together.
    assert [s["requests"] for s in steps(events)] == [4] * 4


def test_each_event_comes_from_an_engine_process(engine):
    offset = engine.observations.mark()
    engine.chat([[{"role": "user", "content": "hello"}]], Sampling(max_tokens=2))
    events = engine.observations.since(offset)
    assert len(steps(events)) == 2 and not audio_calls(events)
    engine_pids = set(engine.proc.seen)
    assert {e["pid"] for e in events} <= engine_pids, (events, engine_pids)


def test_an_interpreter_without_the_variable_is_not_observed(interpreter, tmp_path):
    # The runner and engine modules load untouched, and nothing is written.
    probe = ("import sys, vllm.v1.worker.gpu_model_runner as g; "
             "print(g.GPUModelRunner.execute_model.__module__, "
             "sorted(m for m in sys.modules if m.startswith('mmharness_observe')))")
    out = subprocess.run([str(interpreter.python), "-c", probe], env=interpreter.env(),
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["vllm.v1.worker.gpu_model_runner", "[]"]
    assert list(tmp_path.iterdir()) == []
