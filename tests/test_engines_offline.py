"""OfflineEngine on the real CPU engine: one batch in one generate, bad input
as a result, and SIGKILL of the engine core as a prompt verdict."""
import pytest

from harness.checks.verdicts import Cause, CheckFailure
from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.outcomes import Completion, EngineCrashed, Rejected
from harness.engines.procs import group_members
from harness.workloads.chat import image_part, user

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine(offline_gemma4):
    return offline_gemma4


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
