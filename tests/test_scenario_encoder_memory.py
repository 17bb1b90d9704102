"""The encoder-memory family on the CPU tier's tiny Gemma4, for real: memory
is recorded by the host sampler, emulation is skipped with its reason, and
the engine's teardown is a check of its own that names the scenarios."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scenario_runs import run_scenarios

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    return run_scenarios("test_encoder_memory.py", tmp_path_factory.mktemp("encoder"),
                         "--card", "l4-22g")


def test_workload_passes_with_memory_recorded(family):
    records, out = family
    assert out.returncode == 0, out.stdout[-3000:]
    for check in ("test_all_answered_without_oom[tiny-gemma4]",
                  "test_alive_after_encoder_batch[tiny-gemma4]",
                  "test_image_invariance_in_big_batch[tiny-gemma4-very-wide]",
                  "test_image_invariance_in_big_batch[tiny-gemma4-very-tall]"):
        rec = records[check]
        assert rec.verdict == "pass", rec
        assert rec.peak_memory["engine-rss"] > 500 * 2**20  # a real engine's tree, not zero
        assert len(rec.memory_timeline["t"]) > 10
    workload = records["test_all_answered_without_oom[tiny-gemma4]"].evidence["workload"]
    assert workload["many-square-896"]["images"] >= 2 and workload["video0-16f"]["frames"] == 16


def test_card_emulation_is_skipped_on_the_cpu_tier_with_its_reason(family):
    records, _ = family
    rec = records["test_peak_within_emulated_card[tiny-gemma4]"]
    assert rec.verdict == "skip" and "GPU-tier setting" in rec.message


def test_budget_contract_of_the_installed_engine(family):
    records, _ = family
    rec = records["test_encoder_chunk_budget_contract"]
    assert rec.verdict == "pass" and "_encoder_chunk" in rec.evidence["source"]


def test_engine_teardown_is_a_check_naming_what_it_served(family):
    records, _ = family
    [teardown] = [r for k, r in records.items() if k.startswith("01-offline")]
    assert teardown.family == "engine_teardown" and teardown.verdict == "pass", teardown
    assert teardown.evidence["scenarios"] == ["test_encoder_memory[tiny-gemma4]"]
    assert teardown.evidence["survivors"] == []
    assert teardown.evidence["recoveries"][0]["what"].startswith("engine shared memory")  # what the engine held


def test_unknown_card_is_a_clear_error_before_any_engine(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--card", "tpu-9000"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "unknown card profile 'tpu-9000'" in out.stderr
