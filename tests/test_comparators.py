"""The greedy comparator on crafted outputs, under a zero-noise profile (the
CPU tier on one stack) and a GPU-like one (splits within a measured margin,
followed past the split)."""
import dataclasses
from dataclasses import dataclass, field

import pytest

from harness.checks.comparators import compare_greedy
from harness.checks.noise import NoiseProfile, poisson_upper_bound
from harness.engines.outcomes import NotForced

EXACT = NoiseProfile("cpu", "cpu:_C", "tiny", "bfloat16", "same-stack", 0.0, 0.0, 0, measured="crafted")
GPU_LIKE = NoiseProfile("gpu", "gpu:crafted", "tiny", "bfloat16", "same-stack", 4.0, 1.0, 4)


@dataclass
class Out:
    token_ids: list
    logprobs: list = field(default_factory=list)
    finish_reason: str | None = "length"


def lp(*pairs):
    return dict(pairs)


def test_identical_outputs_pass_under_both_profiles():
    for profile in (EXACT, GPU_LIKE):
        c = compare_greedy(Out([1, 2, 3], [lp((1, -0.1))] * 3), Out([1, 2, 3], [lp((1, -0.1))] * 3), profile)
        assert c.ok and c.identical and c.divergence is None and not c.splits


# --- zero noise: no split is forgiven, logprobs must be equal ----------------------------

def test_zero_noise_fails_a_split_however_close_to_a_tie():
    """The seed of the power issue: a split at position 0 between tokens each
    in the other's top-5, a hundredth of a nat apart, passed as a near-tie."""
    left = Out([368, 2], [lp((368, -1.00), (65, -1.01)), lp((2, -0.1))])
    right = Out([65, 2], [lp((65, -1.00), (368, -1.01)), lp((2, -0.1))])
    c = compare_greedy(left, right, EXACT, labels=("batch", "solo"))
    assert not c.ok and not c.identical
    assert c.divergence.position == 0 and "measured no split" in c.message
    assert "batch token 368" in c.message and "solo token 65" in c.message


def test_zero_noise_fails_the_smallest_logprob_difference():
    left = Out([1, 2], [lp((1, -0.5)), lp((2, -2.0))])
    right = Out([1, 2], [lp((1, -0.5)), lp((2, -2.0 - 1e-6))])
    c = compare_greedy(left, right, EXACT)
    assert not c.ok and "position 1" in c.message and "logprob" in c.message


def test_zero_noise_never_calls_a_follower():
    def follow(_):
        raise AssertionError("a zero-noise profile tolerates no split to follow")
    left, right = Out([5], [lp((5, -0.1), (6, -0.2))]), Out([6], [lp((6, -0.1), (5, -0.2))])
    assert not compare_greedy(left, right, EXACT, follow=follow).ok


# --- noise measured: a split within its margin, followed past it ------------------------

def test_split_within_the_measured_margin_is_followed_past_and_the_rest_held():
    left = Out([1, 7, 9, 4], [lp((1, -0.1)), lp((7, -1.00), (8, -1.05)), lp((9, -0.2)), lp((4, -0.3))])
    right = Out([1, 8, 3, 3], [lp((1, -0.1)), lp((8, -0.98), (7, -1.01)), lp((3, -0.2)), lp((3, -0.2))])
    seen = []

    def follow(tokens):  # the right side's stack, forced along left's tokens
        seen.append(list(tokens))
        return Out([9, 4], [lp((9, -0.2)), lp((4, -0.3))])
    c = compare_greedy(left, right, GPU_LIKE, labels=("batch", "solo"), follow=follow)
    assert seen == [[1, 7]]
    assert c.ok and not c.identical and [s.position for s in c.splits] == [1]
    assert c.unscored_after is None and "past 1 split" in c.message


def test_the_continuation_after_a_tolerated_split_is_still_judged():
    left = Out([1, 7, 9], [lp((1, -0.1)), lp((7, -1.00), (8, -1.05)), lp((9, -0.2))])
    right = Out([1, 8, 9], [lp((1, -0.1)), lp((8, -0.98), (7, -1.01)), lp((9, -0.2))])
    c = compare_greedy(left, right, GPU_LIKE, follow=lambda tokens: Out([5], [lp((5, -0.1))]))
    assert not c.ok and "position 2" in c.message and "after following past splits at [1]" in c.message


def test_without_a_follower_the_positions_after_a_split_are_unscored():
    left = Out([7, 9], [lp((7, -1.00), (8, -1.05)), lp((9, -0.2))])
    right = Out([8, 3], [lp((8, -0.98), (7, -1.01)), lp((3, -0.2))])
    c = compare_greedy(left, right, GPU_LIKE)
    assert c.ok and c.unscored_after == 0 and "unscored" in c.message


def test_split_beyond_the_measured_margin_fails():
    left = Out([5], [lp((5, -0.1), (6, -4.0))])
    right = Out([6], [lp((6, -0.1), (5, -4.0))])
    c = compare_greedy(left, right, GPU_LIKE)
    assert not c.ok and "beyond the 1.0 nats" in c.message


def test_split_outside_top_k_fails_naming_position_and_tokens():
    left = Out([1, 7], [lp((1, -0.1)), lp((7, -0.5), (2, -3.0))])
    right = Out([1, 8], [lp((1, -0.1)), lp((8, -0.5), (3, -3.0))])
    c = compare_greedy(left, right, GPU_LIKE, labels=("batch", "solo"))
    assert not c.ok
    assert c.divergence.position == 1 and c.divergence.left_token_in_right is None
    assert "position 1" in c.message and "token 7" in c.message and "token 8" in c.message


def test_too_many_splits_are_not_noise():
    n = 8
    left = Out([7] * n, [lp((7, -1.0), (8, -1.01))] * n)
    right = Out([8] * n, [lp((8, -1.0), (7, -1.01))] * n)
    follow = lambda tokens: Out([8] * (n - len(tokens)), [lp((8, -1.0), (7, -1.01))] * (n - len(tokens)))  # noqa: E731
    c = compare_greedy(left, right, GPU_LIKE, follow=follow)
    assert not c.ok and "splits in one answer" in c.message


def test_same_tokens_within_the_profiles_logprob_bound_pass_and_beyond_fail():
    bound = GPU_LIKE.logprob_tolerance(-2.0)
    left = Out([1, 2], [lp((1, -0.10)), lp((2, -2.00))])
    assert compare_greedy(left, Out([1, 2], [lp((1, -0.10)), lp((2, -2.00 - bound * 0.9))]), GPU_LIKE).ok
    assert not compare_greedy(left, Out([1, 2], [lp((1, -0.10)), lp((2, -2.00 - bound * 1.1))]), GPU_LIKE).ok


# --- what never matches --------------------------------------------------------------

@pytest.mark.parametrize("profile", [EXACT, GPU_LIKE], ids=["exact", "gpu-like"])
def test_empty_output_fails(profile):
    assert not compare_greedy(Out([]), Out([1]), profile).ok


@pytest.mark.parametrize("profile", [EXACT, GPU_LIKE], ids=["exact", "gpu-like"])
def test_length_mismatch_fails_even_when_the_shorter_is_a_prefix(profile):
    c = compare_greedy(Out([1, 2, 3], [lp((1, -0.1))] * 3), Out([1, 2], [lp((1, -0.1))] * 2), profile)
    assert not c.ok and "lengths differ" in c.message


@pytest.mark.parametrize("profile", [EXACT, GPU_LIKE], ids=["exact", "gpu-like"])
def test_different_finish_reason_fails(profile):
    left, right = Out([1, 2], [lp((1, -0.1))] * 2), Out([1, 2], [lp((1, -0.1))] * 2)
    left.finish_reason, right.finish_reason = "length", "stop"
    c = compare_greedy(left, right, profile, labels=("batch", "solo"))
    assert not c.ok and "'length'" in c.message and "'stop'" in c.message


def test_a_split_the_followers_stack_cannot_be_forced_past_leaves_the_rest_unscored():
    """A server whose template does not keep the forced tokens (NotForced):
    the split is still judged, the positions after it are not, and the
    verdict says why."""
    left = Out([1, 7, 3], [lp((1, -0.1)), lp((7, -1.0), (8, -1.1)), lp((3, -0.1))])
    right = Out([1, 8, 4], [lp((1, -0.1)), lp((8, -1.0), (7, -1.1)), lp((4, -0.1))])

    def follow(tokens):
        raise NotForced("the prompt the server rendered ends with [9], not with the forced [1, 7]")
    c = compare_greedy(left, right, GPU_LIKE, labels=("batch", "server"), follow=follow)
    assert c.ok and c.unscored_after == 1 and "could not be forced" in c.message and "[9]" in c.message


def test_the_split_limit_is_the_profiles():
    n = 3
    left = Out([7] * n, [lp((7, -1.0), (8, -1.01))] * n)
    right = Out([8] * n, [lp((8, -1.0), (7, -1.01))] * n)
    follow = lambda tokens: Out([8] * (n - len(tokens)), [lp((8, -1.0), (7, -1.01))] * (n - len(tokens)))  # noqa: E731
    assert compare_greedy(left, right, GPU_LIKE, follow=follow).ok
    two = dataclasses.replace(GPU_LIKE, max_splits=2)
    c = compare_greedy(left, right, two, follow=follow)
    assert not c.ok and "3 splits in one answer of 3 tokens" in c.message and "allows 2" in c.message


def test_an_answer_longer_than_the_calibrations_may_split_at_the_measured_rate():
    """Calibration saw 20 splits in 400 positions of 20-token answers, at
    most 1 in one answer: a rate of up to 8.3% could have shown that few
    (99% upper bound), so a 40-token answer may split 4 times, a fifth split
    is more than noise; an answer no longer than the calibration's is held
    to max_splits."""
    measured = dataclasses.replace(GPU_LIKE, max_splits=1, figures={"pairs": 20, "positions": 380, "splits": 20})
    assert measured.split_rate == pytest.approx(0.0828, abs=1e-4)
    assert measured.splits_allowed(20) == 1 and measured.splits_allowed(40) == 4

    def answers(n_splits: int, n: int = 40):  # the right side splits every 8th position, followed or not
        split = lambda i: i % 8 == 0 and i // 8 < n_splits  # noqa: E731
        left = Out([7] * n, [lp((7, -1.0), (8, -1.01))] * n)
        right = Out([8 if split(i) else 7 for i in range(n)],
                    [lp((8, -1.0), (7, -1.01)) if split(i) else lp((7, -1.0), (8, -1.01)) for i in range(n)])
        return left, right, lambda forced: Out(right.token_ids[len(forced):], right.logprobs[len(forced):])
    left, right, follow = answers(4)
    assert compare_greedy(left, right, measured, follow=follow).ok
    left, right, follow = answers(5)
    c = compare_greedy(left, right, measured, follow=follow)
    assert not c.ok and "5 splits in one answer of 40 tokens" in c.message and "allows 4" in c.message


def test_the_split_rate_bound_is_the_poisson_upper_bound_of_the_calibrations_count():
    """Tabulated one-sided 99% bounds: 0 events -> 4.61, 1 -> 6.64, 3 -> 10.05."""
    assert [round(poisson_upper_bound(k, 0.99), 2) for k in (0, 1, 3)] == [4.61, 6.64, 10.05]
