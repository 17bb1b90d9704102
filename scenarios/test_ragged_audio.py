"""Ragged audio: clips of different durations in one forward pass.

The regression: concurrent requests with audio clips of different durations
reached the Gemma3n/Gemma4 audio tower as a Python list instead of a padded
tensor (`'list' object has no attribute 'squeeze'`), then EngineDeadError,
and every in-flight request was lost. Gemma3n was rejected even earlier with
`inconsistent shapes`. Run for every audio model of the tier.

Workload → run → checks. Each check is its own test and its own record.
"""
from __future__ import annotations

import pytest

from harness.engines.base import Sampling
from harness.workloads import audio

pytestmark = [pytest.mark.modality("audio"), pytest.mark.engine]

# Fixed length with EOS ignored, so outputs are comparable position by position.
SAMPLING = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)
EQUAL_DURATION_S = 3.0


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module", params=["ragged", "equal"])
def batch(request, runner, audio_durations):
    """One batch in one generate call (offline engine), then each clip alone."""
    durations = audio_durations if request.param == "ragged" else [EQUAL_DURATION_S] * len(audio_durations)
    work = audio.clip_workload(request.param, durations)
    return runner.batch(work, SAMPLING), runner.each_alone(work, SAMPLING)


@pytest.fixture(scope="module", params=["normal", "stress"])
def load(request, runner, concurrency):
    """N concurrent server requests with clips of distinct durations, and each clip alone."""
    work = audio.clip_workload(f"load-{request.param}",
                               audio.concurrent_durations(concurrency(request.param)))
    return runner.concurrent(work, SAMPLING), runner.each_alone(work, SAMPLING)


# --- checks: one pass, offline ----------------------------------------------

def test_premise_lengths(batch, runner, check):
    """Ragged: all lengths differ; equal: all the same. In samples and in the
    model's own feature frames."""
    run, _ = batch
    check.note(audio.guard_workload_lengths(runner.model, run.workload,
                                            distinct=run.workload.name == "ragged"))


def test_one_pass(batch, check):
    """All prompts went in one generate call, and the engine can hold them in one step."""
    check.one_pass(batch[0])


def test_non_empty(batch, check):
    check.non_empty(batch[0])


def test_batch_invariance(batch, clip, check):
    """A clip's greedy output in the batch equals its output alone: padding
    does not leak into the language model."""
    run, alone = batch
    check.completed(run)
    check.invariant(run, alone, run.labels[clip])


def test_alive_after_batch(batch, check):
    run, _ = batch
    check.alive(run, after=f"{run.workload.name} batch {run.labels}")


# --- checks: concurrent server load -----------------------------------------

def test_concurrent_all_answered(load, check):
    check.completed(load[0])


def test_concurrent_matches_solo(load, check):
    """Each concurrent answer equals the same clip alone (offline engine, or
    a solo request to the same server when the target is remote)."""
    check.all_invariant(*load)


def test_alive_after_load(load, check):
    run, _ = load
    check.alive(run, after=f"{len(run.labels)} concurrent requests")


# --- checks: edge and hostile audio, one request each ----------------------------

@pytest.mark.parametrize("edge", list(audio.EDGE_INPUTS))
def test_edge_input(runner, edge, check):
    """Answered, or a 4xx with a message; the engine alive afterwards. A 5xx,
    a hang or a dead engine fails naming the input. A clip beyond the
    longest allowed that is answered records whether it was cut short."""
    run = runner.one(audio.edge_workload(runner.model, edge), SAMPLING)
    check.accepted_or_4xx(run)
    if edge == "beyond-longest" and run[0].ok:
        longest = runner.one(audio.edge_workload(runner.model, "longest-allowed"), SAMPLING)
        check.note(audio.truncation(run, longest, runner.model))
    check.alive(run, after=f"input {edge}")
