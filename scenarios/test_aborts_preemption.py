"""Aborts and preemption: multimodal requests that end early or are pushed
out, and what they leave behind.

What maintainers test by hand: clients that disconnect mid-stream on
multimodal requests, and a KV cache so short that multimodal requests are
preempted and resumed. The engine must stay healthy, answer later requests
as if nothing had happened, and give back the memory the aborted requests
held.

Workload → run → checks. The workload (harness.workloads.pressure): two
images and two clips, each request with media of its own. One server per
model, its KV cache cut to a few requests' worth (models.toml
[per_family.test_aborts_preemption]), is sent the workload three times:
all at once (the scheduler must preempt some), all at once with every
other client going away once the engine has begun its answer, and all at
once again. The
references are the same requests alone on the isolated reference engine.
"""
from __future__ import annotations

import pytest

from harness.checks.aborts import none_aborted_holding_blocks
from harness.engines.base import Sampling
from harness.runner.declared import Engine
from harness.workloads.pressure import abandon_plan, pressure_workload

pytestmark = [pytest.mark.engine, pytest.mark.aborts]

# Fixed length with EOS ignored, so answers compare position by position.
# Long enough that every request grows into another KV block while others
# hold the rest (a CPU block is 128 tokens; the prompts are 134-217).
SAMPLING = Sampling(max_tokens=128, ignore_eos=True, logprobs=5)
# What the clients that go away ask for: as long an answer as max_model_len
# (512) leaves room for, so that the engine is still at it when their
# leaving reaches it, however busy the machine.
LEAVING = Sampling(max_tokens=280, ignore_eos=True)
# Rounds of leaving clients sent at most. The tiny engine runs a leaver's
# 280 tokens in about half a second; a client in a harness thread, starved
# of its GIL, left after the end in half the rounds. Each leaving client
# runs in a process of its own (harness.engines.leaving), and a round that
# still aborted nothing holding blocks, on a busier machine, is sent again.
ABANDON_ROUNDS = 3

# The server with a short KV cache, and the references' engine, started beside it.
ENGINES = (
    Engine("server", used_by=("pressed", "abandoned", "after")),
    Engine("reference", used_by=("references",)),
)


# --- workload and runs ------------------------------------------------------------

@pytest.fixture(scope="module")
def workload(runner):
    return pressure_workload(runner.entry.modalities)


@pytest.fixture(scope="module")
def references(runner, workload):
    """Each request alone on the reference engine."""
    return runner.each_alone(workload, SAMPLING)


@pytest.fixture(scope="module")
def pressed(runner, workload):
    """Every request at once: more than the KV cache holds."""
    return runner.concurrent(workload, SAMPLING)


@pytest.fixture(scope="module")
def plan(workload) -> list[int | None]:
    return abandon_plan(workload)


@pytest.fixture(scope="module")
def abandon_rounds() -> list:
    """The rounds of leaving clients sent, the last one judged."""
    return []


@pytest.fixture(scope="module")
def abandoned(runner, workload, plan, pressed, abandon_rounds):
    """Then every request at once again, every other client asking for a
    long answer and going away once the engine has begun it; observed
    until the scheduler is idle. A round in which every leaving client
    left after the engine had finished its request is sent again, up to
    ABANDON_ROUNDS in all; the checks judge the last."""
    for _ in range(ABANDON_ROUNDS):
        run = runner.abandoning(workload, SAMPLING, plan, leaving=LEAVING)
        abandon_rounds.append(run)
        if run.use.failure or run.observed is None or not none_aborted_holding_blocks(run.observed):
            return run
    return run


@pytest.fixture(scope="module")
def after(runner, workload, abandoned):
    """Then every request at once, to the end, once more."""
    return runner.concurrent(workload, SAMPLING)


# --- checks ---------------------------------------------------------------------------

def test_preempted_and_resumed(pressed, check):
    """Premise, observed: every request was answered, and the scheduler
    preempted some of them, then resumed and finished each one."""
    check.preempted_and_resumed(pressed)


@pytest.mark.numeric_paths("long-answers")
def test_preempted_answers_match_references(pressed, references, check):
    """Each answer of the run that preempted equals the same request alone,
    and the comparator rejects the other requests' answers."""
    check.all_invariant(pressed, references, path="long-answers")


def test_clients_gone_were_aborted(abandoned, plan, abandon_rounds, check):
    """Premise, observed: the scheduler aborted the requests of clients
    that went away mid-stream (no other), one at least while it held KV
    blocks: what the memory check sees given back."""
    check.note({"rounds_sent": len(abandon_rounds)})
    check.aborted(abandoned, sum(n is not None for n in plan))


def test_aborted_requests_freed_their_memory(abandoned, check):
    """Once the scheduler is idle, the aborted (and finished) requests hold
    no KV block and no encoder-cache slot: a `leak` otherwise."""
    check.freed(abandoned)


@pytest.mark.numeric_paths("long-answers")
def test_answers_beside_aborts_match_references(abandoned, plan, references, check):
    """The requests whose clients stayed got the answers they get alone,
    while the others were aborted beside them."""
    check.all_invariant(abandoned, references, path="long-answers",
                        labels=[label for label, n in zip(abandoned.labels, plan) if n is None])


@pytest.mark.numeric_paths("long-answers")
def test_later_answers_match_references(after, references, check):
    """After the aborts, every request sent again gets its answer alone."""
    check.all_invariant(after, references, path="long-answers")


def test_alive_after_aborts(after, check):
    """The server still answers after the preemptions and the aborts."""
    check.alive(after, after="preemption, aborted clients and a later round")
