"""The soak family for real on the CPU tier's tiny Gemma4, short, with two
faults switched on inside the engine; each check of its kind fails with its
cause:

- every encoder output kept alive, with 4 MiB beside each
  (`keep-encoder-outputs`), is a `leak` of the worker process that runs the
  model, at several times the growth a healthy worker showed early in a
  soak (about 1,200 MiB per 1,000 requests over its first hundred);
- steps that each sleep longer than the one before (`slow-steps`) are a
  `drift` of TPOT.

One soak carries both: neither fault moves the other's measure. The
healthy engine's verdicts are `make run`'s (its bounds come from them).
"""
from __future__ import annotations

import re

import pytest

from harness.models import DEFAULT_FILE
from tests.scenario_runs import run_scenarios
from tests.test_mutations import MODEL, fault_test

pytestmark = pytest.mark.engine
SOAK_S = 45
WARMUP_REQUESTS = 24
# What the fault adds: 4 MiB per media item, about one item per request.
FAULT_MIB_PER_1K = 4000


def short_matrix(tmp) -> str:
    """models.toml with this test's warm-up: a 45 s soak serves a few hundred requests."""
    text = DEFAULT_FILE.read_text()
    cpu = text.index("[tiers.cpu.soak]")
    text = text[:cpu] + re.sub(r"warmup_requests = \d+", f"warmup_requests = {WARMUP_REQUESTS}",
                               text[cpu:], count=1)
    path = tmp / "models.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak-faults")
    return run_scenarios("test_soak.py", tmp, "--model", MODEL, f"--soak-seconds={SOAK_S}",
                         "--models-file", short_matrix(tmp), "-k", "memory_flat or latency_steady",
                         "--inject-faults=keep-encoder-outputs,slow-steps")


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
def test_steps_slowing_down_are_a_drift(faulted):
    records, out = faulted
    rec = _check(records, "latency_steady")
    assert (rec.verdict, rec.cause) == ("fail", "drift"), (rec.message, out.stdout[-2000:])
    assert rec.evidence["drift"]["tpot_p50"] > rec.evidence["bounds"]["tpot_p50"]
