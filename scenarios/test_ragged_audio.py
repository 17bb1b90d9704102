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
from harness.runner import Paired
from harness.runner.declared import Engine
from harness.workloads import audio

pytestmark = [pytest.mark.modality("audio"), pytest.mark.engine]

# Fixed length with EOS ignored, so outputs are comparable position by position.
SAMPLING = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)
EQUAL_DURATION_S = 3.0


# The batch engine, the references' (started beside it), the server.
ENGINES = (
    Engine("offline", used_by=("batch",)),
    Engine("reference", used_by=("batch", "load")),
    Engine("server", used_by=("load", "test_edge_input")),
)


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module")
def limits(runner) -> audio.AudioLimits:
    """The model's own limits on clip length, from its processor and the
    engine's context."""
    return audio.audio_limits(runner.model, runner.args_for(None).get("max_model_len"))


@pytest.fixture(scope="module", params=["ragged", "equal"])
def batch(request, runner, audio_durations, limits):
    """One batch in one generate call (offline engine), then each clip
    alone. Ragged: durations from the model's own limits (a short clip, one
    just short of the longest it takes whole, the window's edge straddled),
    unless --audio-durations names them."""
    durations = audio_durations or audio.ragged_durations(limits, audio.RAGGED_CLIPS)
    if request.param == "equal":
        durations = [EQUAL_DURATION_S] * len(durations)
    work = audio.clip_workload(request.param, durations)
    return Paired(runner.batch(work, SAMPLING), runner.each_alone(work, SAMPLING))


@pytest.fixture(scope="module", params=["normal", pytest.param("stress", marks=pytest.mark.stress)])
def load(request, runner, concurrency, limits):
    """N concurrent server requests with clips of distinct durations (from
    the model's limits), and each clip alone."""
    work = audio.clip_workload(f"load-{request.param}",
                               audio.concurrent_durations(limits, concurrency(request.param)))
    return Paired(runner.concurrent(work, SAMPLING), runner.each_alone(work, SAMPLING))


# --- checks: one pass, offline ----------------------------------------------

def test_one_pass(batch, check):
    """The premise, observed inside the engine: all prompts were scheduled
    in one step, and one audio encoder call held clips of different lengths
    (ragged) or all clips at one length (equal). Without it, the invariance
    below would prove nothing."""
    check.one_pass(batch.run, modality="audio", ragged=batch.run.workload.name == "ragged")


def test_placeholders_as_the_processor(batch, runner, check):
    """Each clip's audio placeholder tokens in the engine's prompt are as
    many as the model's own processor puts there for a clip of that length
    (the durations end one sample past a frame's edge): a count one short
    drops audio without a word."""
    check.placeholders_as_processor(batch.run, audio.processor(runner.model))


@pytest.mark.numeric_paths("same-stack")
def test_batch_invariance(batch, clip, check):
    """A clip's greedy output in the batch equals its output alone on the
    reference engine (no cached tokens): padding does not leak into the
    language model. Prompt tokens, tokens, length, finish reason and
    logprobs, to the same-stack noise profile (measured 0: identical). The
    comparator must reject the other clips' answers (power; the record keeps
    them); an answer that equals another clip's is named as that clip's."""
    check.completed(batch.run)
    check.invariant(batch.run, batch.reference, batch.run.labels[clip])


def test_alive_after_batch(batch, check):
    """The engine still answers after the batch; a crash is named by its
    exception."""
    check.alive(batch.run, after=f"{batch.run.workload.name} batch {batch.run.labels}")


# --- checks: concurrent server load -----------------------------------------

def test_concurrent_all_answered(load, check):
    """Every concurrent request answered (`check.completed`)."""
    check.completed(load.run)


@pytest.mark.numeric_paths("same-stack")
def test_concurrent_matches_solo(load, check):
    """The premise first, observed in the server: the requests were served
    together (a step with two or more prompts in prefill, an audio encoder
    call with two or more clips). Then each concurrent answer equals the
    same clip alone on the reference engine (or the remote server itself,
    with fresh media names), isolated from the run's caches, and the
    comparator rejects the other clips' answers."""
    check.served_together(load.run, modality="audio")
    check.all_invariant(load.run, load.reference)


def test_alive_after_load(load, check):
    """The server still answers after the load (`check.alive`)."""
    check.alive(load.run, after=f"{len(load.run.labels)} concurrent requests")


# --- checks: edge and hostile audio, one request each ----------------------------

@pytest.mark.parametrize("edge", list(audio.EDGE_INPUTS))
def test_edge_input(runner, limits, edge, check):
    """Each input gets the outcome it must: valid audio (very short, silent,
    stereo, resampled, the longest allowed) is answered (a clip the model's
    own processor makes no placeholder of may get a 4xx instead), a resampled clip
    with the prompt tokens of the same audio at 16 kHz mono; garbage, empty
    and truncated payloads and an image labelled as audio get a 4xx with a
    message; beyond the longest, a 4xx or no more prompt tokens than the
    longest allowed. The engine is alive afterwards."""
    spec = audio.EDGE_INPUTS[edge]
    run = runner.one(audio.edge_workload(edge, limits.longest_s), SAMPLING)
    held_to = runner.one(audio.edge_workload(spec.held_to, limits.longest_s), SAMPLING) if spec.held_to else None
    check.edge_outcome(run, spec.expect_for(audio.processor(runner.model)), held_to)
    check.alive(run, after=f"input {edge}")
