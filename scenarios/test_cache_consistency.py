"""Cache consistency: every answer equals its isolated reference, whatever
the engine's caches hold.

The bugs it is for: the same image and prompt twice, with prefix caching
and the shared-memory processor cache, killed EngineCore (vLLM PR #54994);
the same prompt with different images gave garbled answers under
concurrency (#20261); "Expected a cached item for mm_hash" aborted every
request until a restart (#31404, #33865).

Workload → run → checks. The workload (harness.cache.workload): per media
kind, two items of one size under one prompt, and one of them under a
second prompt. Each cell (harness.cache.cells: prefix caching, the
processor cache, the batched-token budget, API servers; --cache-cells
picks the pairwise subset or the full matrix) is a server of its own,
sent the workload twice one request after another, then twice at once.
The second round of each repeats the first, so the caches serve it. The
references are the same requests alone on the isolated reference engine,
computed once for every cell.
"""
from __future__ import annotations

import pytest

from harness.cache.workload import cache_workload, largest_item_tokens
from harness.engines.base import Sampling
from harness.runner.declared import Engine
from harness.workloads import audio

pytestmark = [pytest.mark.engine, pytest.mark.cache]

# Fixed length with EOS ignored, so answers compare position by position.
SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)


def cell_engine_args(runner, cell) -> dict:
    """A cell's server settings: the largest item's tokens bound the
    batched-token budget of the cells that set one."""
    return cell.engine_args(largest_item_tokens(audio.processor(runner.model), runner.entry.modalities))


# A server per cell (each start is about a minute, mostly one core's
# imports: the next cell's starts beside this one's), and the references'
# engine, started beside the first cell's server.
ENGINES = (
    Engine("server", used_by=("cell_args",), args=lambda runner, params: cell_engine_args(runner, params["cell"])),
    Engine("reference", used_by=("references",)),
)


# --- workload and run ---------------------------------------------------------

@pytest.fixture(scope="module")
def workload(runner):
    longest = audio.max_audio_seconds(runner.model) if runner.entry.has("audio") else 0.0
    return cache_workload(runner.entry.modalities, longest)


@pytest.fixture(scope="module")
def references(runner, workload):
    """Each request alone on the reference engine: the same for every cell."""
    return runner.each_alone(workload, SAMPLING)


@pytest.fixture(scope="module")
def cell_args(runner, cell):
    return cell_engine_args(runner, cell)


@pytest.fixture(scope="module")
def sequential(runner, workload, cell_args):
    """The workload twice, one request after another, on the cell's server."""
    return runner.rounds(workload, SAMPLING, at_once=False, engine_args=cell_args)


@pytest.fixture(scope="module")
def at_once(runner, workload, cell_args, sequential):
    """Then twice more, every request of both rounds at once."""
    return runner.rounds(workload, SAMPLING, at_once=True, engine_args=cell_args)


# --- checks ---------------------------------------------------------------------

def test_cell_caches_as_set(sequential, cell, check):
    """Premise, observed: the engine ran the cell's settings. Repeats took
    cached prompt tokens with prefix caching on and none with it off; the
    front end looked media up in its processor cache when on (a repeat hit
    it, with one API server) and never when off."""
    check.caches_as_set(sequential, cell)


@pytest.mark.numeric_paths("same-stack")
def test_sequential_matches_references(sequential, references, check):
    """Both rounds, one request after another: each answer equals the same
    request alone, and the comparator rejects the other requests' answers
    (the pair that shares a prompt; the prompt that shares media)."""
    for run in sequential:
        check.all_invariant(run, references)


@pytest.mark.numeric_paths("same-stack")
def test_concurrent_matches_references(at_once, references, check):
    """Both rounds at once, each request beside its own repeat: each answer
    equals the same request alone, with the same power."""
    for run in at_once:
        check.all_invariant(run, references)


def test_alive_after_cell(at_once, check):
    """The cell's server still answers after its rounds."""
    check.alive(at_once[-1], after="the cell's repeated and concurrent rounds")
