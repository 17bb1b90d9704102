"""The soak family for real on the CPU tier's tiny Gemma4, short, with
faults switched on inside the engine; each check of its kind fails with its
cause:

- every encoder output kept alive, with 4 MiB beside each
  (`keep-encoder-outputs`), is a `leak` of the worker process that runs the
  model, at several times the growth a healthy worker showed early in a
  soak (about 1,200 MiB per 1,000 requests over its first hundred);
- steps that each sleep longer than the one before (`slow-steps`) are a
  `drift` of TPOT;
- a processor cache that serves the first item of a size for every later
  one (`processor-cache-cross`, the shape of vLLM #20261) fails the sampled
  answers with `mismatch`, though the engine stays up and answers fast;
- a scheduler that stops admitting requests while `/health` answers
  (`stop-admitting`) ends the soak with a `hang`, within twice the stall
  bound, with the engine's stacks, and nothing of the engine left.

One soak carries the leak and the crossed cache: neither moves the other's
measure (the crossed features are the same size, and the cache serves them
as fast). The slow steps have a soak of their own: they starve a soak of
requests, and a memory fit of its readings (a slower CI host served 32 in
45 s, too few to fit). The hang ends its soak, so it has one too. The healthy engine's verdicts
are `make run`'s (its bounds come from them).
"""
from __future__ import annotations

import re

import psutil
import pytest

from harness.engines.faults import FAULTS_ENV
from harness.models import DEFAULT_FILE
from tests.scenario_runs import run_scenarios
from tests.test_mutations import MODEL, fault_test

pytestmark = pytest.mark.engine
SOAK_S = 30
# The hang's stall bound: above a fresh engine's first step (it compiles kernels).
STALL_S = 10.0
WARMUP_REQUESTS = 24
# The slowed soak's: its first waves, which compile kernels (a slowdown soon
# outpaces a longer one); and two timeslices, never empty with two waves
# after it (a slowed wave can outlast a quarter of the soak).
SLOWED_WARMUP_REQUESTS = 8
SLOWED_TIMESLICES = 2
# What the fault adds: 4 MiB per media item, about one item per request.
FAULT_MIB_PER_1K = 4000


def short_matrix(tmp, warmup: int = WARMUP_REQUESTS, timeslices: int | None = None) -> str:
    """models.toml with this test's warm-up (a 30 s soak serves a few hundred
    requests), and its timeslices where given."""
    text = DEFAULT_FILE.read_text()
    cpu = text.index("[tiers.cpu.soak]")
    soak = re.sub(r"warmup_requests = \d+", f"warmup_requests = {warmup}", text[cpu:], count=1)
    if timeslices is not None:
        soak = re.sub(r"timeslices = \d+", f"timeslices = {timeslices}", soak, count=1)
    text = text[:cpu] + soak
    path = tmp / "models.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak-faults")
    return run_scenarios("test_soak.py", tmp, "--model", MODEL, f"--soak-seconds={SOAK_S}",
                         "--models-file", short_matrix(tmp), "-k", "memory_flat or answers_match",
                         "--inject-faults=keep-encoder-outputs,processor-cache-cross")


@pytest.fixture(scope="module")
def slowed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak-slowed")
    matrix = short_matrix(tmp, SLOWED_WARMUP_REQUESTS, SLOWED_TIMESLICES)
    return run_scenarios("test_soak.py", tmp, "--model", MODEL, f"--soak-seconds={SOAK_S}", "--models-file", matrix,
                         "-k", "latency_steady", "--inject-faults=slow-steps")


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak-hang")
    return run_scenarios("test_soak.py", tmp, "--model", MODEL, f"--soak-seconds={SOAK_S}", "-k", "soak_answered",
                         f"--stall-seconds={STALL_S}", "--inject-faults=stop-admitting")


def _check(records, name):
    return records[f"test_soak_{name}[{MODEL}]"]


@fault_test
def test_encoder_outputs_kept_alive_are_a_leak_of_the_worker(faulted):
    records, out = faulted
    rec = _check(records, "memory_flat")
    assert (rec.verdict, rec.cause) == ("fail", "leak"), (rec.message, out.stdout[-2000:])
    fits = rec.evidence["fits"]
    leaking = {p: f for p, f in fits.items() if f["verdict"] == "leak"}
    assert set(leaking) == {p for p in fits if p.startswith("VLLM::Worker")}, fits
    # The fault's size, not a healthy worker's growth: its interval clears half of what the fault adds.
    assert all(f["low"] > FAULT_MIB_PER_1K / 2 for f in leaking.values()), leaking
    assert re.search(r"VLLM::Worker\S* grew \+\d+\.\d+ MiB per 1,000 requests \(95 % \[", rec.message), rec.message


@fault_test
def test_steps_slowing_down_are_a_drift(slowed):
    records, out = slowed
    rec = _check(records, "latency_steady")
    assert (rec.verdict, rec.cause) == ("fail", "drift"), (rec.message, out.stdout[-2000:])
    assert rec.evidence["drift"]["tpot_p50"] > rec.evidence["bounds"]["tpot_p50"]


@fault_test
def test_a_cache_serving_another_items_features_fails_the_sampled_answers(faulted):
    records, out = faulted
    rec = _check(records, "answers_match_references")
    assert (rec.verdict, rec.cause) == ("fail", "mismatch"), (rec.message, out.stdout[-2000:])
    assert re.match(r"input w\d+-\S+: ", rec.message), rec.message


@fault_test
def test_an_engine_that_stops_admitting_is_a_hang_of_the_soak_with_stacks_and_nothing_left(hung):
    """The verdict within twice the stall bound of the wave's sending, while
    /health answered; every engine process's stacks in the record; the
    hung engine torn down like a crashed one."""
    records, out = hung
    rec = _check(records, "answered")
    assert (rec.verdict, rec.cause) == ("fail", "hang"), (rec.message, out.stdout[-2000:])
    assert "/health answered 200" in rec.message, rec.message
    took = rec.evidence["stopped_at_s"] - rec.evidence["last_wave_sent_s"]
    assert STALL_S <= took <= 2 * STALL_S, rec.evidence
    crash = rec.evidence["crash"]
    assert not crash["stall"]["scheduled"], crash["stall"]
    core = [p["stacks"] for p in crash["stacks"].values() if "EngineCore" in p["process"]]
    assert core and "most recent call first" in core[0], crash["stacks"].keys()
    teardowns = [r for r in records.values() if r.family == "engine_teardown"]
    assert teardowns and not any(r.evidence.get("survivors") for r in teardowns), [r.message for r in teardowns]
    assert _with_fault("stop-admitting") == [], "a process of the hung engine outlived its run"


def _with_fault(name: str) -> list[int]:
    """Live processes whose environment switches the fault on."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(FAULTS_ENV, "") == name and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
