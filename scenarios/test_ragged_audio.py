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

from harness.checks import (check_accepted_or_4xx, check_alive, check_completed, check_invariant,
                            check_non_empty)
from harness.engines.base import Sampling
from harness.verdicts import Cause, CheckFailure
from harness.workloads import audio
from harness.workloads.audio_runs import (EDGE_INPUTS, batch_run, concurrent_durations,
                                          concurrent_run, edge_request)

pytestmark = [pytest.mark.modality("audio"), pytest.mark.engine]

# Fixed length with EOS ignored, so outputs are comparable position by position.
SAMPLING = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)
EQUAL_DURATION_S = 3.0


def ragged_durations(config) -> list[float]:
    return [float(x) for x in config.getoption("audio_durations").split(",")]


def pytest_generate_tests(metafunc):
    n = len(ragged_durations(metafunc.config))
    if "clip" in metafunc.fixturenames:
        metafunc.parametrize("clip", range(n), ids=[f"clip{i}" for i in range(n)])
    if "load" in metafunc.fixturenames:
        metafunc.parametrize("load", ["normal", "stress"], indirect=True, scope="module")


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module", params=["ragged", "equal"])
def batch(request, model_entry, open_engine):
    """One batch in one generate call, then each clip alone, on the offline engine."""
    durations = ragged_durations(request.config)
    if request.param == "equal":
        durations = [EQUAL_DURATION_S] * len(durations)
    session = open_engine("offline", model_entry,
                          f"{request.module.__name__}[{model_entry.name}-{request.param}]")
    return batch_run(request.param, session, audio.clips(durations), SAMPLING,
                     distinct=request.param == "ragged")


@pytest.fixture(scope="module")
def load(request, model_entry, open_engine):
    """N concurrent server requests with clips of distinct durations."""
    if request.param == "stress" and not request.config.getoption("stress"):
        pytest.skip("stress setting: runs with --stress (`make run`), not in `make test`")
    n = request.config.getoption("stress_concurrency" if request.param == "stress" else "concurrency")
    scenario = f"{request.module.__name__}[{model_entry.name}-load-{request.param}]"
    server = open_engine("server", model_entry, scenario)
    reference = None if request.config.getoption("engine_url") else \
        open_engine("offline", model_entry, scenario)
    return concurrent_run(server, reference, audio.clips(concurrent_durations(n)), SAMPLING)


@pytest.fixture(scope="module")
def server(request, model_entry, open_engine):
    return open_engine("server", model_entry, f"{request.module.__name__}[{model_entry.name}-edge]")


# --- checks: one pass, offline ----------------------------------------------

def test_premise_lengths(batch, check_record):
    """Ragged: all lengths differ; equal: all the same. In samples and in the
    model's own feature frames. Equal clips where distinct ones are required fail."""
    batch.attach(check_record)
    check_record.evidence.update(audio.guard_lengths(batch.clips, batch.frames, distinct=batch.distinct))


def test_one_pass(batch, check_record):
    """All prompts went in one generate call, and the engine can hold them in one step."""
    batch.attach(check_record)
    batch.session.require()
    check_completed(batch.batch, batch.labels)
    calls = {(r.batch_call, r.batch_size) for r in batch.batch}
    if calls != {(calls.copy().pop()[0], len(batch.clips))}:
        raise CheckFailure(Cause.PREMISE, f"prompts did not go in one generate call: {calls}")
    check_record.evidence.update(audio.guard_one_step(
        [r.prompt_token_count for r in batch.batch], batch.session.engine.limits))


def test_non_empty(batch, check_record):
    batch.attach(check_record)
    batch.session.require()
    check_non_empty(batch.batch, batch.labels)


def test_batch_invariance(batch, clip, check_record):
    """A clip's greedy output in the batch equals its output alone: padding
    does not leak into the language model."""
    batch.attach(check_record)
    batch.session.require()
    check_completed(batch.batch, batch.labels)
    label = batch.labels[clip]
    check_record.params["input"] = label
    check_record.outputs = {"batch": batch.batch[clip].to_dict(), "solo": batch.solos[clip].to_dict()}
    check_record.evidence.update(check_invariant(batch.batch[clip], batch.solos[clip], label))


def test_alive_after_batch(batch, check_record):
    batch.attach(check_record)
    check_alive(batch.session.require(), after=f"{batch.name} batch {batch.labels}")


# --- checks: concurrent server load -----------------------------------------

def test_concurrent_all_answered(load, check_record):
    load.attach(check_record)
    load.server.require()
    check_completed(load.results, load.labels)


def test_concurrent_matches_solo(load, check_record):
    """Each concurrent answer equals the same clip's solo output (offline engine,
    or a solo request to the same server when the target is remote)."""
    load.attach(check_record)
    load.server.require()
    check_record.evidence["reference"] = load.reference_kind
    for got, solo, label in zip(load.results, load.solos, load.labels):
        check_invariant(got, solo, label, context="concurrent")


def test_alive_after_load(load, check_record):
    load.attach(check_record)
    check_alive(load.server.require(), after=f"{len(load.labels)} concurrent requests")


# --- checks: edge and hostile audio, one request each ----------------------------

@pytest.mark.parametrize("edge", list(EDGE_INPUTS))
def test_edge_input(server, edge, check_record):
    """Answered, or a 4xx with a message; the engine alive afterwards. A 5xx,
    a hang or a dead engine fails naming the input."""
    server.attach(check_record)
    engine = server.require()
    check_record.params["input"] = edge
    result, notes = edge_request(engine, server.model, edge, SAMPLING)
    check_record.evidence.update(notes)
    check_record.evidence.update(check_accepted_or_4xx(result, edge))
    check_alive(engine, after=f"input {edge}")
