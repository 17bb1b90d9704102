"""The unit a logprob's noise is counted in (harness.checks.noise.logprob_step):
bf16 logits of a large size lie on a coarse grid, and one logit rounding to
its neighbour moves a chosen token's logprob by up to a step of that grid.
The figures are a real position: tiny-gemma4's single-small image at
`_C_AVX512` (forced on an AMD EPYC, family 25 model 17), batched with three
large images against alone, where its chosen token's logit moved one step
of 0.125 (7 bf16 steps of the logprob's size)."""
import math

from harness.calibration.measure import walk
from harness.checks.comparators import compare_greedy
from harness.checks.noise import (BF16_STEP, ONE_ROUNDING_STEPS, STEP, NoiseProfile, load_profiles, logit_grid,
                                  logprob_step, profile_for)
from harness.engines.outcomes import Completion

BATCHED = {249: -0.6338, 134: -1.6338, 88: -2.2588, 283: -2.8838, 246: -3.0088}
ALONE = {249: -0.68912, 134: -1.56412, 88: -2.18912, 283: -2.81412, 246: -3.06412}
# The `_C_AVX512` same-stack profile's bound, measured on the calibration's own workloads.
NOISY = NoiseProfile("cpu", "cpu:_C_AVX512", "tiny-gemma4", "bfloat16", "same-stack", 2.12, 0.0165, 1)
EXACT = NoiseProfile("cpu", "cpu:_C", "tiny-gemma4", "bfloat16", "same-stack", 0.0, 0.0, 0)


def answer(top: dict[int, float]) -> Completion:
    return Completion("", [249], [top], finish_reason="length")


def test_the_grid_is_read_off_the_gaps_of_the_top_logprobs():
    assert logit_grid(BATCHED) == logit_grid(ALONE) == 0.125
    assert logit_grid(BATCHED, {1: -0.1, 2: -0.1 - 2 ** -6}) == 2 ** -6  # the finer side's
    assert logit_grid({1: -0.2}) is None                                 # no gap
    assert logit_grid({1: -0.2, 2: -0.2}) is None                        # a tie
    assert logit_grid({1: -0.123457, 2: -1.301234, 3: -2.718281}) is None  # logits on no bf16 grid of size >= 1


def test_a_one_step_move_of_the_chosen_logit_is_under_one_unit():
    grid = logit_grid(BATCHED, ALONE)
    moved = abs(BATCHED[249] - ALONE[249])
    assert moved / (BF16_STEP * max(1, abs(BATCHED[249]))) > 7    # the old unit: 7 steps
    assert moved / logprob_step(BATCHED[249], grid) < 1           # one step of the grid
    assert logprob_step(-0.6338, grid) == 0.125 * (1 - math.exp(-0.6338))
    assert logprob_step(-0.6338, None) == logprob_step(-0.6338, 2 ** -9) == BF16_STEP  # a fine grid: one bf16 step


def test_the_calibration_measures_it_in_the_same_unit():
    figs = walk(answer(BATCHED), answer(ALONE), None, "single-small")
    assert figs.positions == 1 and 0.9 < figs.max_steps < 1


def test_the_noisy_profile_passes_the_move_and_fails_three_steps_of_the_grid():
    assert compare_greedy(answer(BATCHED), answer(ALONE), NOISY).ok
    # The chosen token's logit three steps up (a leak's size, not a rounding's).
    p = math.exp(ALONE[249])
    leaked = {t: v - 3 * 0.125 * p for t, v in ALONE.items()}
    leaked[249] = ALONE[249] + 3 * 0.125 * (1 - p)
    assert logit_grid(leaked) == 0.125
    c = compare_greedy(answer(leaked), answer(ALONE), NOISY)
    assert not c.ok and "allows" in c.message


def test_an_exact_profile_still_wants_equal_logprobs():
    c = compare_greedy(answer(BATCHED), answer(ALONE), EXACT)
    assert not c.ok and "must be equal" in c.message


def test_a_profile_of_before_judges_in_the_step_it_was_measured_in(tmp_path):
    """Profiles written before the step changed count bf16 steps of the
    logprob's size: their counts, in smaller steps, would make bounds far
    too loose in today's. They judge in their own until calibrated again."""
    old = tmp_path / "profiles.toml"
    old.write_text(NOISY.to_toml().replace(f'step = "{STEP}"\n', ""), encoding="utf-8")
    (loaded,) = load_profiles(old)
    assert loaded.step == "" and NOISY.step == STEP
    assert loaded.logprob_tolerance(-0.6338, 0.125) == 2.12 * BF16_STEP
    assert not compare_greedy(answer(BATCHED), answer(ALONE), loaded).ok
    assert compare_greedy(answer(BATCHED), answer(ALONE), NOISY).ok


def test_an_exact_profile_on_a_host_kind_shown_noisy_judges_at_one_rounding():
    """tiny-gemma3n measured no noise at `_C_AVX512` (768 positions), then
    its ragged batch moved a logprob by one logit's rounding: where another
    one-stack profile of the host kind measured noise, an exact one judges
    at one rounding of every logit, and nowhere else."""
    gemma3n = NoiseProfile("cpu", "cpu:_C_AVX512", "tiny-gemma3n", "bfloat16", "same-stack", 0.0, 0.0, 0)
    chunked = NoiseProfile("cpu", "cpu:_C_AVX512", "tiny-gemma4", "bfloat16", "chunked-vs-unchunked", 0.0, 0.0, 0)
    tp = NoiseProfile("cpu", "cpu:_C", "tiny-gemma4", "bfloat16", "tp", 80.0, 1.9, 4)
    native = NoiseProfile("cpu", "cpu:_C", "tiny-gemma3n", "bfloat16", "same-stack", 0.0, 0.0, 0)
    profiles = [gemma3n, chunked, NOISY, tp, native]
    judged = profile_for("cpu", "cpu:_C_AVX512", "tiny-gemma3n", "bfloat16", "same-stack", profiles=profiles)
    assert judged.logprob_steps == ONE_ROUNDING_STEPS and judged.split_margin_nats == 0
    assert "tiny-gemma4 same-stack" in judged.note
    assert not profile_for("cpu", "cpu:_C_AVX512", "tiny-gemma4", "bfloat16", "chunked-vs-unchunked",
                           profiles=profiles).exact
    # The native host kind's one-stack profiles are all exact: a TP profile's noise says nothing of them.
    assert profile_for("cpu", "cpu:_C", "tiny-gemma3n", "bfloat16", "same-stack", profiles=profiles).exact
    # The real move: the encoder family's chunk1 check met the single-small image's logit rounding
    # (the chunked-vs-unchunked profile, exact, judged it a mismatch); three steps of the grid fail.
    floored = profile_for("cpu", "cpu:_C_AVX512", "tiny-gemma4", "bfloat16", "chunked-vs-unchunked",
                          profiles=profiles)
    assert not compare_greedy(answer(BATCHED), answer(ALONE), chunked).ok
    assert compare_greedy(answer(BATCHED), answer(ALONE), floored).ok
    p = math.exp(ALONE[249])
    leaked = {t: v - 3 * 0.125 * p for t, v in ALONE.items()}
    leaked[249] = ALONE[249] + 3 * 0.125 * (1 - p)
    assert not compare_greedy(answer(leaked), answer(ALONE), floored).ok
