"""The in-engine fault switches (MMHARNESS_FAULTS) act like the bugs they
stand for, each shown at the lowest level that proves it. Four engine starts,
shared: faults that need ragged encoder calls cannot share an engine with
single-request-steps, which prevents them."""
import pytest

from fixtures import media
from harness.checks import check_invariant
from harness.engines.base import Sampling
from harness.engines.faults import fault_env
from harness.engines.offline import OfflineEngine
from harness.engines.results import Completion, EngineCrashed, Rejected
from harness.engines.server import ServerEngine
from harness.verdicts import Cause, CheckFailure
from harness.workloads import audio
from harness.workloads.chat import audio_part, user

pytestmark = pytest.mark.engine

RAGGED = audio.clip_workload("ragged", [1.0, 3.5, 7.0, 12.0])
CONVS = [r.conversation for r in RAGGED.requests]
SAMPLING = Sampling(max_tokens=8)


def _started(cls, tiny_gemma4, interpreter, folder, faults, **args):
    model, base_args = tiny_gemma4
    eng = cls(model, base_args | args, interpreter, folder / "engine.log", env=fault_env(*faults))
    eng.start()
    return eng


@pytest.fixture(scope="module")
def leaky(tiny_gemma4, interpreter, tmp_path_factory):
    """Padding leaks into ragged audio; an engine started isolated keeps its caches."""
    eng = _started(OfflineEngine, tiny_gemma4, interpreter, tmp_path_factory.mktemp("leaky"),
                   ["padding-leak", "reference-cache"],
                   enable_prefix_caching=False, mm_processor_cache_gb=0)
    yield eng
    assert eng.close() == []


@pytest.fixture
def ragged_raiser(tiny_gemma4, interpreter, tmp_path_factory):
    eng = _started(OfflineEngine, tiny_gemma4, interpreter, tmp_path_factory.mktemp("raiser"),
                   ["raise-ragged-audio"])
    yield eng
    assert eng.close() == []


@pytest.fixture(scope="module")
def single_steps(tiny_gemma4, interpreter, tmp_path_factory):
    eng = _started(OfflineEngine, tiny_gemma4, interpreter, tmp_path_factory.mktemp("single"),
                   ["single-request-steps"])
    yield eng
    assert eng.close() == []


@pytest.fixture(scope="module")
def solo(single_steps):
    """Each clip alone, on an engine whose encoder cache the faulty engines
    never share (a clip seen before skips the encoder, and so the fault)."""
    results = [single_steps.chat([c], SAMPLING)[0] for c in CONVS]
    assert all(isinstance(r, Completion) for r in results), results
    return results


def test_padding_leak_makes_ragged_batch_differ_from_solo(leaky, solo):
    batch = leaky.chat(CONVS, SAMPLING)
    *shorter, longest = RAGGED.labels
    # Untouched by the leak, the longest clip stays invariant: the check can pass.
    check_invariant(batch[-1], solo[-1], longest)
    for i, label in enumerate(shorter):
        with pytest.raises(CheckFailure) as failure:
            check_invariant(batch[i], solo[i], label)
        assert failure.value.cause == Cause.MISMATCH


def test_reference_cache_reuses_state_in_an_engine_started_isolated(leaky):
    # After the batch above, the 12 s clip again: its prompt (324 tokens, over
    # one block) would be computed whole by an engine without prefix caching.
    offset = leaky.observations.mark()
    [r] = leaky.chat([CONVS[-1]], SAMPLING)
    assert isinstance(r, Completion), r
    events = leaky.observations.since(offset)
    prefill = next(e for e in events if e["event"] == "step")
    assert sum(prefill["tokens"].values()) < r.prompt_token_count, (prefill, r.prompt_token_count)
    assert not [e for e in events if e["event"] == "encoder"]


def test_raise_ragged_audio_kills_the_engine_with_its_exception(ragged_raiser):
    results = ragged_raiser.chat(CONVS, SAMPLING)
    assert all(isinstance(r, EngineCrashed) for r in results), results
    # As vLLM's multiprocess executor reports a worker's exception.
    assert results[0].cause.kind == Cause.PYTHON_EXCEPTION
    assert "RuntimeError" in results[0].cause and "mmharness fault: ragged audio batch" in results[0].cause
    assert ragged_raiser.crashed


def test_single_request_steps_spreads_a_batch_over_steps(single_steps):
    offset = single_steps.observations.mark()
    results = single_steps.chat([user(f"Tell me about {i}") for i in range(4)], Sampling(max_tokens=4))
    assert all(isinstance(r, Completion) for r in results), results
    steps = [e for e in single_steps.observations.since(offset) if e["event"] == "step"]
    seen: set[str] = set()
    new_per_step = []
    for step in steps:
        new_per_step.append(len(set(step["tokens"]) - seen))
        seen |= set(step["tokens"])
    # Without the fault the offline batch is one step of 4 (test_engine_observations).
    assert new_per_step[:4] == [1, 1, 1, 1] and len(seen) == 4, new_per_step


def test_reject_8khz_answers_a_valid_8khz_clip_with_400(tiny_gemma4, interpreter, tmp_path):
    eng = _started(ServerEngine, tiny_gemma4, interpreter, tmp_path, ["reject-8khz"])
    try:
        clip_8k = media.encode_audio(media.audio_clip(2.0, sample_rate=8000), 8000, "wav")
        [r] = eng.chat([user(audio_part(clip_8k), audio.PROMPT)], Sampling(max_tokens=2))
        offset = eng.observations.mark()
        [ok] = eng.chat([CONVS[0]], Sampling(max_tokens=2))
        # The server's engine processes are observed too.
        encoded = [e for e in eng.observations.since(offset) if e["event"] == "encoder"]
    finally:
        assert eng.close() == []
    assert isinstance(r, Rejected) and r.status == 400, r
    assert "mmharness fault: 8 kHz audio rejected" in r.message
    assert isinstance(ok, Completion), ok  # 16 kHz audio still served
    assert [(e["modality"], e["items"]) for e in encoded] == [("audio", 1)]
