"""Encoder memory under low free memory.

The regression (vLLM PR 43296): a 26B AWQ Gemma4 MoE on a 22 GiB L4 left
about 3 GiB free after load; the vision encoder sized its chunks from total
memory, not free, and a transient F.one_hot buffer of 2.88 GiB hit OOM.

Every model runs on a card: `--card`, or its default in models.toml. On the
GPU tier a ballast leaves the card's capacity free; on the CPU tier the
engine's memory query answers the card's figures, scaled to the tiny model
(harness/memory/card/emulation.py). The engine's own processes record what the
query answered, what the chunk function was passed and answered, and each
pass through the vision tower with the transient it took
(harness/memory/card/chunks.py); a record shows "free X, total Y -> chunks of k
for n items".

Workload -> run -> checks.
"""
from __future__ import annotations

import pytest

from harness.checks.budget_probe import load_gemma4_encoder_chunk
from harness.engines.base import Sampling
from harness.runner import Paired
from harness.runner.declared import SAME, Engine
from harness.workloads import vision

pytestmark = [pytest.mark.modality("video"), pytest.mark.engine]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)
# One engine on the card (its arguments the card's; each run steers its
# memory answer and chunks), and the references' engine with the same
# arguments, started beside it.
ENGINES = (
    Engine("offline", args=SAME, used_by=("on_card", "low_free", "forced", "ragged_video")),
    Engine("reference", args=SAME, used_by=("on_card", "ragged_video")),
)
VIDEO_FRAMES = {"cpu": 16, "gpu": 64}
# Forced chunk sizes. The batch holds 24 images (6 per shape; the processor
# pads every image to one patch count, so they form one bucket) and two
# videos of 16 frames: 3 and 5 put chunk edges inside a prompt's images and
# across the two videos; "unchunked" sends each bucket through at once.
FORCED_CHUNKS = {"chunk1": 1, "chunk2": 2, "chunk3": 3, "chunk5": 5, "unchunked": 1 << 30}


# --- workload and runs -----------------------------------------------------------

@pytest.fixture(scope="module")
def work(runner):
    """Single-image prompts (one per shape), prompts full of one shape, a
    mixed prompt, and two long videos."""
    return vision.encoder_workload(runner.mm_limit("image"), videos=2,
                                   video_frames=VIDEO_FRAMES[runner.entry.tier])


@pytest.fixture(scope="module")
def on_card(runner, card, work):
    """The whole workload in one batch on the model's card, and each prompt
    alone on the reference engine."""
    args = card.engine_overrides()
    return Paired(runner.batch(work, SAMPLING, engine_args=args, steer=card.steering()),
                  runner.each_alone(work, SAMPLING, engine_args=args))


@pytest.fixture(scope="module")
def low_free(runner, card, work):
    """The same batch on the same card with free memory far below its total
    (the memory query emulated, on both tiers)."""
    steer = card.answer.low_free().as_steering() if card.answer else {}
    return runner.batch(work, SAMPLING, engine_args=card.engine_overrides(), steer=steer)


@pytest.fixture(scope="module", params=list(FORCED_CHUNKS))
def chunk_size(request) -> int:
    return FORCED_CHUNKS[request.param]


@pytest.fixture(scope="module")
def forced(runner, card, work, chunk_size):
    """The same batch with the encoder's chunk size forced."""
    return runner.batch(work, SAMPLING, engine_args=card.engine_overrides(), steer={"chunk": chunk_size})


@pytest.fixture(scope="module")
def ragged_video(runner, card):
    """Two videos of different frame counts and resolutions in one batch,
    and each alone."""
    work = vision.ragged_video_workload()
    args = card.engine_overrides()
    return Paired(runner.batch(work, SAMPLING, engine_args=args, steer=card.steering()),
                  runner.each_alone(work, SAMPLING, engine_args=args))


# --- checks: on the card --------------------------------------------------------

def test_all_answered_without_oom(on_card, card, check):
    """Every prompt of the big mixed batch answered on the card: no OOM, no
    crash."""
    card.require()
    check.note({**on_card.run.facts, **card.describe()})
    check.completed(on_card.run)


def test_encoder_chunked_on_card(on_card, card, check):
    """The premise of the family, observed in the engine: on the card the
    encoder went through a batch in more than one pass. Each memory answer
    and the chunks made of it are in the record."""
    card.require()
    check.chunked(on_card.run, "the batch on the card")


@pytest.mark.numeric_paths("same-stack")
def test_batch_invariance_on_card(on_card, card, check):
    """Every prompt's output in the chunked batch equals its output alone on
    the reference engine, and the comparator rejects the other prompts'
    answers."""
    card.require()
    check.completed(on_card.run)
    check.all_invariant(on_card.run, on_card.reference)


def test_alive_after_encoder_batch(on_card, card, check):
    """The engine still answers afterwards (`check.alive`)."""
    card.require()
    check.alive(on_card.run, after="the encoder batch")


def test_peak_within_emulated_card(on_card, card, check):
    """The engine's peak (NVML per process, or device arithmetic where pids
    do not match) stays within the budget it was given on the card (not the
    card's capacity, which the ballast makes impossible to exceed). Needs
    the ballast: skipped where the card lives in the memory query only."""
    check.peak_within_card(on_card.run, card)


def test_encoder_transient_within_stated_budget(on_card, card, check):
    """Each vision-tower pass's transient, measured inside the engine (the
    CUDA allocator's peak above what it held before the pass), stays within
    the budget the engine stated for that chunk: the chunk it chose is
    judged by measurement, not by its own cost formula. On the CPU tier the
    transient is the process's resident high-water mark: recorded, not held
    to the budget, because a tiny model's passes reuse freed heap and read
    as 0-12 KiB; it fails here if nothing was measured."""
    card.require()
    check.transients_within_budget(on_card.run, "the batch on the card")


# --- checks: the call site ------------------------------------------------------

def test_chunk_from_free_memory(on_card, low_free, card, check):
    """The encoder hands its chunk function the free memory its query
    answered, not the total, and with free memory far below the total its
    chunks shrink. A call site that passes the total as free fails with
    cause "over-budget: chunk sized from total memory, not free"."""
    card.require()
    check.chunk_from_free(on_card.run, low_free)


# --- checks: chunk boundaries ---------------------------------------------------

@pytest.mark.numeric_paths("chunked-vs-unchunked")
def test_chunk_boundary_invariance(forced, chunk_size, on_card, card, check):
    """With the chunk size forced to 1, 2, 3, 5 or everything at once, the
    encoder really made passes of that size (observed), and every prompt's
    output equals its output alone on the reference engine. The comparator
    rejects the other prompts' answers and, where it tells it from the
    reference beyond the path's noise, the unforced batch's answer (another
    chunk setting's)."""
    card.require()
    check.forced_chunk(forced, chunk_size)
    wrong = check.told_apart(on_card.run, on_card.reference, "the unforced batch's answer",
                             path="chunked-vs-unchunked")
    check.all_invariant(forced, on_card.reference, wrong=wrong, path="chunked-vs-unchunked")


# --- checks: ragged video -------------------------------------------------------

def test_ragged_video_one_pass(ragged_video, card, check):
    """The premise, observed: both video prompts in one step, and one video
    encoder call holding videos of different frame counts."""
    card.require()
    check.note(ragged_video.run.facts)
    check.one_pass(ragged_video.run, modality="video", ragged=True)


@pytest.mark.numeric_paths("same-stack")
def test_ragged_video_invariance(ragged_video, card, check):
    """Each video's output in the ragged batch equals its output alone on
    the reference engine."""
    card.require()
    check.all_invariant(ragged_video.run, ragged_video.reference)


# --- unit-level: the chunk function's own promise -------------------------------

def test_encoder_chunk_budget_contract(engine_interpreter, check):
    """The engine's own chunk-size function, called over every card profile
    and a grid of free memory, keeps its stated transient within half of
    free memory, answers at least 1, and never shrinks as free memory grows.
    It catches a function that breaks its own promise (a budget taken from
    total memory, a floor of 0, a non-monotone answer). It cannot catch a
    cost formula that underestimates the real transient (its cost is a copy
    of the engine's own) or a call site that passes the wrong figure: those
    are test_encoder_transient_within_stated_budget and
    test_chunk_from_free_memory."""
    fn, source = load_gemma4_encoder_chunk(engine_interpreter.python)
    if fn is None:
        pytest.skip(source)
    check.chunk_contract(fn, source)
