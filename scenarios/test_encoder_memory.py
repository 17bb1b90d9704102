"""Encoder memory under low free memory.

The regression: a 26B AWQ Gemma4 MoE on a 22 GiB L4 left about 3 GiB free
after load; the vision encoder sized its batch chunks from total memory, not
free, and a transient F.one_hot buffer of 2.88 GiB hit OOM. On the GPU tier
the card is emulated (`--card l4-22g`) and the engine's peak must stay
within it; on the CPU tier the tiny Gemma4 runs the same workload, memory is
recorded by the host sampler, and emulation is skipped with its reason.

Workload → run → checks.
"""
from __future__ import annotations

import pytest

from harness.budget_probe import check_encoder_chunk, load_gemma4_encoder_chunk
from harness.engines.base import Sampling
from harness.workloads import vision

pytestmark = [pytest.mark.modality("video"), pytest.mark.engine]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)
VIDEO_FRAMES = {"cpu": 16, "gpu": 64}


@pytest.fixture(scope="module")
def encoder(runner, card):
    """Many images of mixed resolutions and long videos in one batch, then
    each single-image prompt alone."""
    work = vision.encoder_workload(runner.mm_limit("image"),
                                   video_frames=VIDEO_FRAMES[runner.entry.tier], videos=2)
    batch = runner.batch(work, SAMPLING, engine_args=card.engine_overrides())
    singles = work.only(*(f"single-{shape}" for shape in vision.SHAPES))
    return batch, runner.each_alone(singles, SAMPLING, engine_args=card.engine_overrides())


def test_all_answered_without_oom(encoder, check):
    """Every prompt of the big mixed batch answered: no OOM, no crash. The
    same `check.completed` as the audio batch's, which the
    raise-ragged-audio mutation fails; no vision-side fault switch yet."""
    run, _ = encoder
    check.note(run.facts)
    check.completed(run)


def test_alive_after_encoder_batch(encoder, check):
    """The engine still answers afterwards (`check.alive`, failed by the
    raise-ragged-audio mutation on the audio batch)."""
    check.alive(encoder[0], after="the encoder batch")


@pytest.mark.parametrize("shape", list(vision.SHAPES))
def test_image_invariance_in_big_batch(encoder, shape, check):
    """An image's output in the big batch equals its output alone on the
    reference engine. The comparison and the isolation are the audio
    invariance's, which the padding-leak and reference-cache mutations fail."""
    run, alone = encoder
    check.completed(run)
    check.invariant(run, alone, f"single-{shape}")


def test_peak_within_emulated_card(encoder, card, check):
    """The engine's peak (NVML per process, or device arithmetic where pids
    do not match) stays within the budget it was given on the emulated card
    (not the card's capacity, which the ballast makes impossible to exceed),
    even when the big GPU did not OOM."""
    check.note(card.check_peak(encoder[0].memory()))


def test_encoder_chunk_budget_contract(engine_interpreter, check):
    """The engine's own chunk-size function keeps its transient within half of
    free memory for every card profile (no GPU needed)."""
    fn, source = load_gemma4_encoder_chunk(engine_interpreter.python)
    if fn is None:
        pytest.skip(source)
    check.note({"source": source})
    check_encoder_chunk(fn, source=source)
