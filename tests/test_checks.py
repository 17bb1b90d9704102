"""The shared checks, on hand-made results and a stub engine: each passes what
it should, and fails with the cause and a message that names the input."""
import pytest

from harness.checks.noise import NoiseProfile
from harness.checks.requests import (ANSWER, REFUSE, REFUSE_OR_CAP, check_alive, check_completed, check_edge_outcome,
                                     check_invariant, check_power)
from harness.verdicts import Cause, CheckFailure, DetailedCause
from harness.engines.base import Engine
from harness.engines.outcomes import Completion, EngineCrashed, Rejected, RequestTimedOut

SQUEEZE = DetailedCause(Cause.PYTHON_EXCEPTION, "AttributeError: 'list' object has no attribute 'squeeze'")


def done(*token_ids, logprobs=()):
    return Completion(text="x", token_ids=list(token_ids), logprobs=list(logprobs))


def crash(cause=SQUEEZE):
    return EngineCrashed(cause=cause, exit_code=1, log_tail=[f"line {i}" for i in range(100)],
                         detail="engine core died.")


# --- check_completed --------------------------------------------------------

def test_completed_returns_the_completions():
    results = [done(1), done(2)]
    assert check_completed(results, ["clip-1s", "clip-3.5s"]) == results


@pytest.mark.parametrize("result, cause, words", [
    (crash(), SQUEEZE, "engine core died."),
    (Rejected(500, "internal error"), Cause.HTTP_5XX, "internal error"),
    (Rejected(400, "too many tokens"), Cause.HTTP_4XX, "too many tokens"),
    (RequestTimedOut(30.0), Cause.TIMEOUT, "30.0"),
], ids=["crash", "5xx", "4xx", "timeout"])
def test_completed_fails_on_the_first_unanswered_naming_it(result, cause, words):
    with pytest.raises(CheckFailure) as info:
        check_completed([done(1), result, crash(Cause.OOM)], ["clip-1s", "clip-3.5s", "clip-7s"])
    failure = info.value
    assert failure.cause == cause
    assert failure.message.startswith("input clip-3.5s: no answer") and words in failure.message
    assert failure.evidence["input"] == "clip-3.5s"


def test_completed_keeps_only_the_end_of_a_crash_log():
    with pytest.raises(CheckFailure) as info:
        check_completed([crash()], ["clip-1s"])
    assert info.value.evidence["result"]["log_tail"] == [f"line {i}" for i in range(60, 100)]


def test_completed_needs_a_label_per_result():
    with pytest.raises(ValueError):
        check_completed([done(1), done(2)], ["clip-1s"])


# --- check_invariant and check_power ---------------------------------------

EXACT = NoiseProfile("cpu", "cpu:_C", "tiny", "bfloat16", "same-stack", 0.0, 0.0, 0, measured="crafted")
GPU_LIKE = NoiseProfile("gpu", "gpu:crafted", "tiny", "bfloat16", "same-stack", 4.0, 1.0, 4)


def test_invariant_passes_the_same_output_and_returns_its_evidence():
    evidence = check_invariant(done(5, 6, 7), done(5, 6, 7), "clip-3.5s", EXACT)
    assert evidence["input"] == "clip-3.5s" and evidence["batch"] == evidence["solo"] == [5, 6, 7]
    assert "identical" in evidence["comparison"]


def test_invariant_tolerates_a_split_only_where_noise_was_measured():
    batched = done(5, 8, logprobs=[{5: -0.1}, {8: -0.50, 9: -0.55}])
    solo = done(5, 9, logprobs=[{5: -0.1}, {9: -0.50, 8: -0.52}])
    evidence = check_invariant(batched, solo, "clip-7s", GPU_LIKE)
    assert evidence["comparison"].startswith("diverged at position 1: batch token 8, solo token 9, a split within")
    assert evidence["unscored_after"] == 1
    with pytest.raises(CheckFailure) as info:
        check_invariant(batched, solo, "clip-7s", EXACT)
    assert info.value.cause is Cause.MISMATCH and "measured no split" in info.value.message


def test_invariant_fails_a_real_divergence_with_its_position():
    batched = done(5, 8, logprobs=[{5: -0.1}, {8: -0.1}])
    solo = done(5, 9, logprobs=[{5: -0.1}, {9: -0.1}])
    with pytest.raises(CheckFailure) as info:
        check_invariant(batched, solo, "clip-7s", GPU_LIKE, context="concurrent")
    failure = info.value
    assert failure.cause is Cause.MISMATCH
    assert failure.message.startswith("input clip-7s: diverged at position 1")
    assert failure.divergence["position"] == 1 and failure.evidence["concurrent"] == [5, 8]


def test_invariant_compares_prompt_token_counts():
    a, b = done(5, 6), done(5, 6)
    a.prompt_token_count, b.prompt_token_count = 120, 96
    with pytest.raises(CheckFailure) as info:
        check_invariant(a, b, "clip-1s", EXACT)
    assert info.value.cause is Cause.MISMATCH and "120 prompt tokens in batch, 96 in solo" in info.value.message


def test_invariant_names_which_side_went_unanswered():
    with pytest.raises(CheckFailure) as info:
        check_invariant(done(1), crash(), "clip-12s", EXACT)
    assert info.value.cause == SQUEEZE and "input clip-12s (solo)" in info.value.message


def test_power_keeps_what_it_rejected():
    ref = done(5, 6, logprobs=[{5: -0.1}, {6: -0.2}])
    other = done(5, 7, logprobs=[{5: -0.1}, {7: -0.2}])
    rejected = check_power(ref, "clip0", {"clip1's solo answer": other}, EXACT)
    assert rejected["clip1's solo answer"]["tokens"] == [5, 7]
    assert "position 1" in rejected["clip1's solo answer"]["rejected"]


def test_power_fails_the_premise_when_a_wrong_answer_is_accepted():
    """Two identical clips: the comparator cannot tell one's answer from the other's."""
    ref = done(5, 6, logprobs=[{5: -0.1}, {6: -0.2}])
    twin = done(5, 6, logprobs=[{5: -0.1}, {6: -0.2}])
    with pytest.raises(CheckFailure) as info:
        check_power(ref, "clip0", {"clip1's solo answer": twin}, EXACT)
    assert info.value.cause is Cause.PREMISE
    assert "cannot tell its solo answer from clip1's solo answer" in info.value.message
    assert info.value.evidence["indistinguishable"] == "clip1's solo answer"


def test_power_under_noise_rejects_only_beyond_it():
    ref = done(5, 8, logprobs=[{5: -0.1}, {8: -0.50, 9: -0.55}])
    near = done(5, 9, logprobs=[{5: -0.1}, {9: -0.50, 8: -0.52}])  # a split within 1 nat
    with pytest.raises(CheckFailure):
        check_power(ref, "x", {"near": near}, GPU_LIKE)
    # followed past the split, its continuation gives it away
    near_longer = done(5, 9, 3, logprobs=[{5: -0.1}, {9: -0.50, 8: -0.52}, {3: -0.1}])
    ref_longer = done(5, 8, 4, logprobs=[{5: -0.1}, {8: -0.50, 9: -0.55}, {4: -0.1}])
    follow = lambda tokens: done(4, logprobs=[{4: -0.1}])  # noqa: E731
    assert "position 2" in check_power(ref_longer, "x", {"near": near_longer}, GPU_LIKE, follow=follow)["near"]["rejected"]


# --- check_edge_outcome -----------------------------------------------------

def done_with(prompt_tokens):
    return Completion(text="x", token_ids=[1], prompt_token_count=prompt_tokens)


def test_a_valid_input_answered_passes_and_a_resampled_one_with_the_same_prompt_tokens():
    assert check_edge_outcome(done(1), "stereo", ANSWER)["outcome"] == "answered"
    out = check_edge_outcome(done_with(60), "8kHz", ANSWER, reference=done_with(60))
    assert out["reference_prompt_tokens"] == 60


def test_a_resampled_clip_with_other_prompt_tokens_fails():
    with pytest.raises(CheckFailure) as info:
        check_edge_outcome(done_with(30), "8kHz", ANSWER, reference=done_with(60))
    assert info.value.cause == Cause.WRONG_OUTCOME and "16 kHz mono gives 60" in info.value.message


@pytest.mark.parametrize("status", [400, 413, None], ids=["400", "413", "offline"])
def test_a_valid_input_refused_fails_with_the_refusal(status):
    with pytest.raises(CheckFailure) as info:
        check_edge_outcome(Rejected(status, "bad audio"), "8kHz", ANSWER)
    assert info.value.cause == Cause.HTTP_4XX and "a valid input refused" in info.value.message
    assert "bad audio" in info.value.message  # the server's words: what a known issue names


@pytest.mark.parametrize("status", [400, 413, None], ids=["400", "413", "offline"])
def test_an_invalid_input_refused_with_a_message_passes(status):
    out = check_edge_outcome(Rejected(status, "cannot decode"), "empty-payload", REFUSE)
    assert out["outcome"] == f"rejected {status}" and out["message"] == "cannot decode"


def test_an_invalid_input_answered_fails():
    with pytest.raises(CheckFailure) as info:
        check_edge_outcome(done(1), "random-bytes-as-wav", REFUSE)
    assert info.value.cause == Cause.WRONG_OUTCOME and "must be refused" in info.value.message


def test_beyond_the_longest_refused_or_capped_passes_and_longer_fails():
    check_edge_outcome(Rejected(400, "too long"), "beyond-longest", REFUSE_OR_CAP, done_with(750))
    check_edge_outcome(done_with(750), "beyond-longest", REFUSE_OR_CAP, done_with(750))
    with pytest.raises(CheckFailure) as info:
        check_edge_outcome(done_with(900), "beyond-longest", REFUSE_OR_CAP, done_with(750))
    assert info.value.cause == Cause.WRONG_OUTCOME and "more than the longest" in info.value.message


@pytest.mark.parametrize("result, cause", [
    (Rejected(400, ""), Cause.HTTP_4XX),  # a refusal that says nothing is no answer either
    (Rejected(500, "internal error"), Cause.HTTP_5XX),
    (crash(), SQUEEZE),
    (RequestTimedOut(30.0), Cause.TIMEOUT),
], ids=["silent-4xx", "5xx", "crash", "timeout"])
@pytest.mark.parametrize("expect", [ANSWER, REFUSE, REFUSE_OR_CAP])
def test_anything_else_fails_naming_the_input(result, cause, expect):
    with pytest.raises(CheckFailure) as info:
        check_edge_outcome(result, "nan-audio", expect)
    assert info.value.cause == cause and info.value.message.startswith("input nan-audio: ")
    assert info.value.evidence["input"] == "nan-audio"


# --- check_alive ------------------------------------------------------------

class StubEngine(Engine):
    """Answers every request with `answer`; dead when `crashed` is set."""

    def __init__(self, answer=None, crashed=None):
        super().__init__("stub", None, request_timeout=1.0)
        self.answer, self.crashed, self.asked = answer, crashed, 0

    def chat(self, conversations, sampling=None, adapters=None):
        self.asked += 1
        return [self.answer] * len(conversations)


def test_alive_when_it_answers_a_trivial_request():
    engine = StubEngine(answer=done(1))
    check_alive(engine, after="ragged batch")
    assert engine.asked == 1


def test_a_dead_engine_fails_with_its_crash_cause_without_being_asked():
    engine = StubEngine(answer=done(1), crashed=crash())
    with pytest.raises(CheckFailure) as info:
        check_alive(engine, after="ragged batch")
    assert info.value.cause == SQUEEZE and engine.asked == 0
    assert info.value.message == "after ragged batch: engine is dead: engine core died."
    assert info.value.evidence["crash"]["cause"] == SQUEEZE.value


@pytest.mark.parametrize("answer, cause", [
    (done(), Cause.EMPTY_OUTPUT),
    (Rejected(500, "internal error"), Cause.HTTP_5XX),
    (RequestTimedOut(1.0), Cause.TIMEOUT),
], ids=["empty", "5xx", "timeout"])
def test_an_engine_that_does_not_answer_is_not_alive(answer, cause):
    with pytest.raises(CheckFailure) as info:
        check_alive(StubEngine(answer=answer), after="hostile input 'nan-audio'")
    assert info.value.cause == cause
    assert info.value.message.startswith("after hostile input 'nan-audio': engine did not answer")


# --- Check.isolated: a reference engine that died is not a cache -------------

def _reference_run(outcomes, observed):
    from harness.engines.base import Engine as _Engine
    from harness.models import ModelEntry
    from harness.runner.run import EngineUse, Run, Sent
    from harness.workloads.request import Request, Workload

    audio = {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,"}}
    requests = tuple(Request(label, [{"role": "user", "content": [audio]}])
                     for label in ("clip-1s", "clip-3.5s"))
    entry = ModelEntry(tier="cpu", name="m", model="tiny:gemma4", modalities=frozenset({"audio"}),
                       engine_args={})
    use = EngineUse(kind="offline", label="s", entry=entry, engine=_Engine.__new__(_Engine))
    return Run.sent("each_alone", Workload("ragged", requests), Sent(use, outcomes, observed))


def _isolated(reference, label):
    from harness.results.record import CheckRecord
    from harness.runner.check import Check

    Check(CheckRecord(id="x")).isolated(reference, label)


def test_a_reference_whose_engine_died_fails_with_the_crash_not_as_a_cache():
    """The first reference killed its engine in its encoder call, the second
    got the dead engine: each check names the crash, neither blames a cache."""
    reference = _reference_run([crash(), crash()], [{"event": "encoder", "items": 1}])
    for label in reference.labels:
        with pytest.raises(CheckFailure) as info:
            _isolated(reference, label)
        assert info.value.cause == SQUEEZE
        assert info.value.message.startswith(f"input {label} (solo): no answer")


def test_an_answered_reference_beside_a_dead_one_is_held_only_to_its_own_media():
    reference = _reference_run([done(1), crash()], [{"event": "encoder", "items": 1}])
    _isolated(reference, "clip-1s")


def test_answered_references_served_from_a_cache_still_fail_the_premise():
    reference = _reference_run([done(1), done(2)], [{"event": "encoder", "items": 1}])
    with pytest.raises(CheckFailure) as info:
        _isolated(reference, "clip-3.5s")
    assert info.value.cause == Cause.PREMISE and "encoded 1 of the 2" in info.value.message


def test_a_crash_on_an_edge_input_is_told_in_words_not_as_a_repr():
    crash = EngineCrashed(DetailedCause(Cause.PYTHON_EXCEPTION, "RuntimeError: mat1 must be contiguous"))
    with pytest.raises(CheckFailure) as e:
        check_edge_outcome(crash, "silence", "answer")
    assert e.value.message == "input silence: python-exception: RuntimeError: mat1 must be contiguous"
