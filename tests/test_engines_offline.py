"""OfflineEngine on the real CPU engine: one batch in one generate, bad input
as a result, the in-engine observer (what the engine really scheduled and
encoded, written by its own processes: a ragged batch is one step and one
audio encoder call; no variable, no observer), and SIGKILL of the engine
core as a prompt verdict. One engine serves the module (a start is ~40 s)."""
import subprocess

import pytest

from harness.verdicts import Cause, CheckFailure
from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.offline import OfflineEngine
from harness.engines.outcomes import Completion, EngineCrashed, Rejected
from harness.engines.procs import group_members
from harness.workloads import audio
from harness.workloads.chat import image_part, user
from tests.observed_events import feature_frames

pytestmark = pytest.mark.engine

RAGGED_S = [1.0, 3.5, 7.0, 12.0]


def steps(events):
    return [e for e in events if e["event"] == "step"]


def audio_calls(events):
    return [e for e in events if e["event"] == "encoder" and e["modality"] == "audio"]


@pytest.fixture(scope="module")
def engine(tiny_gemma4, interpreter, tmp_path_factory):
    """The module's engine on the tiny Gemma4; its teardown must leave no
    process behind (the last test has killed its core by then)."""
    model, args = tiny_gemma4
    engine = OfflineEngine(model, args, interpreter, tmp_path_factory.mktemp("offline") / "engine.log")
    engine.start()
    yield engine
    assert engine.close() == []


def test_batch_goes_in_one_generate_with_logprobs(engine):
    convs = [user(f"Tell me about number {i}") for i in range(4)]
    results = engine.chat(convs, Sampling(max_tokens=6, logprobs=5))
    assert all(isinstance(r, Completion) for r in results), results
    assert {r.batch_call for r in results} == {results[0].batch_call}
    assert {r.batch_size for r in results} == {4}
    for r in results:
        assert len(r.token_ids) == 6  # EOS ignored: fixed length
        assert len(r.logprobs) == 6 and all(len(pos) >= 5 for pos in r.logprobs)
        assert r.token_ids[0] in r.logprobs[0]
    assert engine.limits["max_num_seqs"] >= 4


def test_bad_image_is_a_result_and_the_engine_survives(engine):
    bad = image_part(b"this is not a png", "image/png")
    [r] = engine.chat([user(bad, "Describe.")], Sampling(max_tokens=2))
    assert isinstance(r, Rejected) and r.status is None, r
    assert engine.assert_alive().token_ids


def test_log_window_holds_what_was_written_after_the_mark_and_nothing_before(engine):
    before = engine.log_path.read_text()
    assert before, "premise: the log holds the start-up before the mark"
    window = engine.mark()
    [r] = engine.chat([user(image_part(b"not an image either", "image/png"), "Describe.")], Sampling(max_tokens=2))
    assert isinstance(r, Rejected), r
    text = engine.log_since(window)
    # The worker printed this rejection's traceback into the window, once ...
    error, message = r.message.split(": ", 1)
    assert "Traceback (most recent call last)" in text
    assert text.count(f"{error}: {message.splitlines()[0]}") == 1, (r.message, text[-2000:])
    # ... and the window is the log from the mark on: nothing written before it.
    assert engine.log_path.read_text().startswith(before + text)


def test_observations_sit_beside_the_log(engine):
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


def test_sigkill_of_engine_core_mid_batch_is_a_prompt_verdict(engine):
    # Last in the module: it kills the shared engine.
    pgid = engine.proc.pid
    seen = list(engine.proc.seen.values())
    results, verdict_s = kill_core_during(engine, [user(f"long answer {i}") for i in range(8)],
                                          Sampling(max_tokens=1500))
    assert verdict_s < 15, verdict_s
    assert all(isinstance(r, EngineCrashed) for r in results), results
    assert results[0].cause == Cause.ENGINE_DEAD
    assert "EngineCore" in results[0].detail and results[0].log_tail
    # The verdict came first; the clean-up runs behind it, and close() waits for it.
    assert engine.close() == []
    assert group_members(pgid) == []
    assert not [p for p in seen if p.is_running() and p.status() != "zombie"]
    with pytest.raises(CheckFailure) as failure:
        engine.assert_alive()
    assert failure.value.cause == Cause.ENGINE_DEAD
