"""Soak: sustained mixed multimodal load on the server for a time budget.

The regressions a crash check never sees: EngineCore host memory grew
about 1.7 GB per round of multimodal requests (vLLM #28726); vLLM's own
leak test reuses two images, so its caches never churn; the same prompt
with different images gave garbled answers under concurrency (#20261).

Workload → run → checks. The load (harness.soak.load): waves of the tier's
concurrency, streamed to the server one after another for --soak-seconds;
in each wave a pair with the same prompt and different media, new media
(the caches churn) and media repeated across waves (the caches hit),
images and clips of mixed sizes and durations; where the family's server
serves LoRA (models.toml, at the engine's version), requests switch between
the base model and the crafted `lm` adapter within each wave and from wave
to wave. The engine's multimodal processor cache is kept small for this
family (models.toml), so that it fills during the warm-up and churns after
it, instead of growing through the whole soak towards its 4 GiB default. The bounds are the tier's
([tiers.<tier>.soak]).
"""
from __future__ import annotations

import pytest

from harness.engines.base import Sampling
from harness.runner.declared import Engine
from harness.soak.load import SoakMix, soak_adapters
from harness.workloads import audio

# alone: its latency checks time the server; under `make run`'s two workers,
# the other worker's engines wait while it runs.
pytestmark = [pytest.mark.engine, pytest.mark.soak, pytest.mark.alone]

# Fixed length with EOS ignored, so sampled answers compare position by position.
SAMPLING = Sampling(max_tokens=16, ignore_eos=True, logprobs=5)
# The soak's server (its crafted adapters served by name), and the
# references' engine, started beside it.
ENGINES = (
    Engine("server", used_by=("soak",), args=lambda runner, params: served_args(runner)),
    Engine("reference", used_by=("test_soak_answers_match_references",)),
)


def served_args(runner) -> dict | None:
    """The server's settings: the adapters the soak switches between, by name."""
    adapters = soak_adapters(runner)
    return {"lora_modules": [f"{a.name}={a.path}" for a in adapters]} if adapters else None


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module")
def soak(runner, soak_settings, soak_seconds):
    """The waves, streamed to the model's server for the budget. The
    references' engine starts beside the server, and both are up before
    the first wave (Runner.soak): no start may share the machine with the
    soak it times (an engine at rest waits on a socket, costing no CPU)."""
    longest = audio.max_audio_seconds(runner.model) if "audio" in runner.entry.modalities else 0.0
    mix = SoakMix(soak_settings.concurrency, runner.entry.modalities, max_audio_s=longest or 6.0,
                  adapters=soak_adapters(runner))
    return runner.soak(mix, SAMPLING, soak_seconds, engine_args=served_args(runner))


# --- checks ---------------------------------------------------------------------

def test_soak_answered(runner, soak, check):
    """The server took the load for the whole budget: no crash, no hang (a
    request with no progress for the stall bound), every request answered."""
    if runner.lora_left_out:
        check.note({"adapter_switches": f"left out: {runner.lora_left_out}"})
    check.soak_answered(soak, runner.soak_run(soak))


@pytest.mark.numeric_paths("same-stack")
def test_soak_answers_match_references(runner, soak, soak_settings, check):
    """After the warm-up, one wave per timeslice: each of its answers equals
    the same request alone on the isolated reference engine, and the
    comparator rejects the wave's other answers (power). The pair in each
    wave has one prompt and two media items, so an answer that took the
    other item's features is named as the other's."""
    for index in check.soak_sample(soak, runner.soak_run(soak), soak_settings):
        run = runner.wave_run(soak, index)
        check.all_invariant(run, runner.each_alone(run.workload, SAMPLING))


def test_soak_memory_flat(runner, soak, soak_settings, check):
    """Each engine process's resident memory, fitted over the requests
    served after the warm-up (Theil-Sen, 95 % interval): no process grows
    by more than the leak bound per 1,000 requests."""
    check.no_leak(soak, runner.soak_run(soak), soak_settings)


def test_soak_latency_steady(runner, soak, soak_settings, check):
    """The last timeslice's median TTFT and TPOT, as the client measured
    them, within the drift bounds of the first timeslice's."""
    check.no_drift(soak, runner.soak_run(soak), soak_settings)


def test_soak_goodput(runner, soak, soak_settings, check):
    """The share of requests within the tier's SLO (TTFT and TPOT) is at
    least the tier's goodput."""
    check.goodput(soak, runner.soak_run(soak), soak_settings)
