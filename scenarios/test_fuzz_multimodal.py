"""Fuzzing: hypothesis searches the space of batches for the next bug of
the seed bugs' kind, and shrinks what it finds to the smallest batch that
still fails with the same cause.

Users found the seed bugs one batch shape at a time (clips of different
durations in one forward pass). Here the harness draws the shapes itself,
within the model's limits (harness.fuzz.strategies): the number of
requests in a step; per request its media (audio, images, video) and
their sizes, sample rates and channels; the clips' content; the prompt;
the greedy length; the order. Every failure leaves its shrunk workload, a
replay command and a standalone repro.py (harness.fuzz.reproducers).

Workload → run → checks: the property is one check per model.
"""
from __future__ import annotations

import pytest

from harness.fuzz import strategies
from harness.fuzz.judge import BatchJudge
from harness.fuzz.search import Inconclusive

# The entries with `fuzz = true` in the matrix: each costs an engine pair
# and the budget, so the CPU tier fuzzes its richest model (tiny-gemma4:
# audio, images and video) and the GPU tier both seed-bug models.
pytestmark = [pytest.mark.engine, pytest.mark.fuzz]


def test_fuzz_batches(runner, fuzz, check):
    """For the budget, every drawn batch holds (harness.fuzz.judge): it is
    answered, in one step, and each request's answer equals its answer
    alone on the isolated reference engine, with power (the comparator
    rejects every other request's reference). The engines are shared by
    every example; a crashed one is restarted. A failure fails this check
    with the cause of its shrunk case; the record holds the search's
    figures (examples, shapes tried, time) and each failure's reproducers."""
    check.nothing_found(fuzz.search(check, runner, strategies.batches, BatchJudge(runner)))


def test_fuzz_replay(runner, replay_spec, check):
    """The workload --fuzz-replay names, judged once by the same property
    (collected only with --fuzz-replay, for the workload's model)."""
    try:
        BatchJudge(runner)(replay_spec)
    except Inconclusive as why:
        pytest.skip(f"the replayed workload cannot be judged: {why}")
