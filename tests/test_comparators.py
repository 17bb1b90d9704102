"""The greedy comparator on crafted token and logprob sequences."""
from dataclasses import dataclass, field

from harness.checks.comparators import compare_greedy, logprob_tolerance


@dataclass
class Out:
    token_ids: list
    logprobs: list = field(default_factory=list)
    finish_reason: str | None = "length"


def lp(*pairs):
    return dict(pairs)


def test_identical_outputs_pass():
    c = compare_greedy(Out([1, 2, 3], [lp((1, -0.1))] * 3), Out([1, 2, 3], [lp((1, -0.1))] * 3))
    assert c.ok and c.identical and c.divergence is None


def test_near_tie_split_passes_with_its_evidence():
    left = Out([1, 7, 9], [lp((1, -0.1)), lp((7, -1.00), (8, -1.05)), lp((9, -0.2))])
    right = Out([1, 8, 4], [lp((1, -0.1)), lp((8, -0.98), (7, -1.01)), lp((4, -0.2))])
    c = compare_greedy(left, right, labels=("batch", "solo"))
    assert c.ok and not c.identical
    assert c.divergence.position == 1
    assert (c.divergence.left_token, c.divergence.right_token) == (7, 8)
    assert "batch token 7" in c.message and "solo token 8" in c.message


def test_split_outside_top_k_fails_naming_position_and_tokens():
    left = Out([1, 7], [lp((1, -0.1)), lp((7, -0.5), (2, -3.0))])
    right = Out([1, 8], [lp((1, -0.1)), lp((8, -0.5), (3, -3.0))])
    c = compare_greedy(left, right, labels=("batch", "solo"))
    assert not c.ok
    assert c.divergence.position == 1 and c.divergence.left_token_in_right is None
    assert "position 1" in c.message and "token 7" in c.message and "token 8" in c.message


def test_split_in_top_k_but_far_from_a_tie_fails():
    left = Out([5], [lp((5, -0.1), (6, -4.0))])
    right = Out([6], [lp((6, -0.1), (5, -4.0))])
    c = compare_greedy(left, right, near_tie_nats=1.0)
    assert not c.ok and "not a near-tie" in c.message


def test_empty_output_fails():
    assert not compare_greedy(Out([]), Out([1])).ok


def test_length_mismatch_fails_even_when_the_shorter_is_a_prefix():
    c = compare_greedy(Out([1, 2, 3], [lp((1, -0.1))] * 3), Out([1, 2], [lp((1, -0.1))] * 2))
    assert not c.ok and "lengths differ" in c.message


def test_different_finish_reason_fails():
    left, right = Out([1, 2], [lp((1, -0.1))] * 2), Out([1, 2], [lp((1, -0.1))] * 2)
    left.finish_reason, right.finish_reason = "length", "stop"
    c = compare_greedy(left, right, labels=("batch", "solo"))
    assert not c.ok and "'length'" in c.message and "'stop'" in c.message


def test_same_tokens_with_logprobs_apart_beyond_kernel_noise_fail():
    left = Out([1, 2], [lp((1, -0.10)), lp((2, -2.00))])
    right = Out([1, 2], [lp((1, -0.10)), lp((2, -2.50))])
    c = compare_greedy(left, right)
    assert not c.ok and "position 1" in c.message and "logprob" in c.message


def test_same_tokens_within_kernel_noise_pass():
    step = logprob_tolerance(-2.0)
    left = Out([1, 2], [lp((1, -0.10)), lp((2, -2.00))])
    right = Out([1, 2], [lp((1, -0.10)), lp((2, -2.00 - step * 0.9))])
    assert compare_greedy(left, right).ok
    assert compare_greedy(Out([1], [lp((1, -0.1))]), Out([1], [lp((1, -9.0))]), check_logprobs=False).ok
