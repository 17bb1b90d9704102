"""Fuzzing: hypothesis searches the space of batches for the next bug of
the seed bugs' kind, and shrinks what it finds to the smallest batch that
still fails with the same cause.

Users found the seed bugs one batch shape at a time (clips of different
durations in one forward pass). Here the harness draws the shapes itself,
within the model's limits (harness.fuzz.strategies): the number of
requests in a step; per request its media (audio, images, video) and
their sizes, sample rates and channels; the clips' content; the prompt;
the greedy length; the order; with LoRA on, each request's adapter.
Hostile payloads go through the server (harness.fuzz.hostile). Every
failure leaves its shrunk workload, a replay command and a standalone
repro.py (harness.fuzz.reproducers).

Workload → run → checks: each property is one check per model.
"""
from __future__ import annotations

import pytest

from harness.fuzz import hostile, strategies
from harness.fuzz.judge import BatchJudge, HostileJudge
from harness.fuzz.search import Inconclusive
from harness.runner.declared import Engine

# The entries with `fuzz = true` in the matrix: each costs an engine pair,
# a server and the budget, so the CPU tier fuzzes its richest model
# (tiny-gemma4: audio, images and video) and the GPU tier both seed-bug models.
pytestmark = [pytest.mark.engine, pytest.mark.fuzz]


# The batches' engine, their references' (started beside it, before the
# budget's clock starts), and the hostile payloads' server: started when
# first used, for an ahead start would spend the batches' budget.
ENGINES = (
    Engine("offline", used_by=("test_fuzz_batches",)),
    Engine("reference", used_by=("test_fuzz_batches",)),
    Engine("server", used_by=("test_fuzz_hostile",), ahead=False),
)


@pytest.fixture(scope="module")
def limits(runner, fuzz):
    """What the model accepts: its matrix entry, its engine's version (LoRA
    where it serves it) and its own processor."""
    return fuzz.limits(runner)


@pytest.mark.numeric_paths("same-stack")
def test_fuzz_batches(runner, limits, fuzz, check):
    """For the budget, every drawn batch holds (harness.fuzz.judge): it is
    answered, in one step, and each request's answer equals its answer
    alone on the isolated reference engine, with power (the comparator
    rejects every other request's reference). The engines are shared by
    every example; a crashed one is restarted. A failure fails this check
    with the cause of its shrunk case; the record holds the search's
    figures (examples, shapes tried, time) and each failure's reproducers."""
    check.nothing_found(fuzz.search(check, runner, strategies.batches(limits), BatchJudge(runner, limits)))


@pytest.mark.parametrize("kind", hostile.KINDS)
@pytest.mark.numeric_paths("same-stack")
def test_fuzz_hostile(runner, limits, fuzz, kind, check):
    """For its share of the budget, every drawn payload of the kind gets a
    4xx with a message (beyond the longest clip: a 4xx, or an answer capped
    at the longest clip's prompt tokens), and the server stays alive."""
    check.nothing_found(fuzz.search(check, runner, hostile.payloads(kind, limits), HostileJudge(runner, limits),
                                    share=1 / len(hostile.KINDS)))


@pytest.mark.numeric_paths("same-stack")
def test_fuzz_replay(runner, limits, replay_spec, check):
    """The workload --fuzz-replay names, judged once by the property that
    found it (collected only with --fuzz-replay, for the workload's model)."""
    judge = HostileJudge(runner, limits) if "kind" in replay_spec else BatchJudge(runner, limits)
    if "kind" in replay_spec:
        judge.start_engines()
    try:
        judge(replay_spec)
    except Inconclusive as why:
        pytest.skip(f"the replayed workload cannot be judged: {why}")
