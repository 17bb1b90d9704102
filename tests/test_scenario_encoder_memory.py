"""The encoder-memory family on the CPU tier's tiny Gemma4, for real, on the
model's default card (models.toml): the memory query emulated and scaled,
the chunks it made observed and shown, memory recorded by the host sampler,
and the engine's teardown a check of its own that names the scenarios."""
import subprocess
import sys
from pathlib import Path

import pytest

from harness.memory.card import emulation_unavailable_reason
from tests.scenario_runs import run_scenarios

ROOT = Path(__file__).resolve().parent.parent
MODEL = "tiny-gemma4"

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("encoder")
    records, out = run_scenarios("test_encoder_memory.py", tmp, "--model", MODEL)
    return records, out, tmp / "run"


def test_every_check_passes_on_the_default_card_with_memory_recorded(family):
    records, out, _ = family
    assert out.returncode == 0, out.stdout[-3000:]
    checks = {k: r for k, r in records.items() if not k.startswith(("01-", "02-", "03-"))}
    assert {r.verdict for k, r in checks.items() if "peak_within" not in k} == {"pass"}, \
        {k: (r.verdict, r.message) for k, r in checks.items()}
    for check in (f"test_all_answered_without_oom[{MODEL}]", f"test_chunk_from_free_memory[{MODEL}]"):
        rec = records[check]
        assert rec.params["card"] == "l4-22g"
        assert rec.peak_memory["engine-rss"] > 500 * 2**20  # a real engine's tree, not zero
        assert len(rec.memory_timeline["t"]) > 10
    evidence = records[f"test_all_answered_without_oom[{MODEL}]"].evidence
    assert evidence["how"] == "emulated memory query" and "scaled x0.025" in evidence["memory_query"]
    assert evidence["workload"]["many-square-896"]["images"] >= 2 and evidence["workload"]["video0-16f"]["frames"] == 16


def test_chunks_per_encoder_call_are_in_the_record_and_the_report(family):
    """free X, total Y -> chunks of k for n items: the card's usual free
    memory gives chunks of 2, free memory far below the total chunks of 1."""
    records, _, run_dir = family
    on_card = records[f"test_encoder_chunked_on_card[{MODEL}]"].evidence["encoder_chunks"]
    assert on_card[0].startswith("image: free 332.8 MiB, total 563.2 MiB (emulated) -> chunks of 2 for 24 items")
    low = records[f"test_chunk_from_free_memory[{MODEL}]"]
    assert low.evidence["chunks"] == {"image": {"usual": 2, "low_free": 1}, "video": {"usual": 2, "low_free": 1}}
    forced = records[f"test_chunk_boundary_invariance[chunk5-{MODEL}]"].evidence["encoder_chunks"]
    assert forced[1].endswith("for 32 items [5, 5, 5, 5, 5, 5, 2]"), forced
    assert "chunks of 2 for 24 items" in (run_dir / "report.html").read_text()


def test_transients_are_measured_and_reported_on_the_host(family):
    records, _, _ = family
    rows = records[f"test_encoder_transient_within_stated_budget[{MODEL}]"].evidence["transients"]
    assert rows and {r["measured_by"] for r in rows} == {"host-rss-high-water"}
    assert all(r["budget_bytes"] > 0 and r["items"] <= 2 for r in rows)


def test_ragged_video_went_through_in_one_encoder_call(family):
    records, _, _ = family
    rec = records[f"test_ragged_video_one_pass[{MODEL}]"]
    assert [[8, 768], [12, 768]] in rec.evidence["observed_encoder_calls"]


def test_peak_check_needs_a_ballast(family):
    records, _, _ = family
    rec = records[f"test_peak_within_emulated_card[{MODEL}]"]
    assert rec.verdict == "skip" and "memory query only" in rec.message


def test_budget_contract_of_the_installed_engine(family):
    records, _, _ = family
    rec = records["test_encoder_chunk_budget_contract"]
    assert rec.verdict == "pass" and "_encoder_chunk" in rec.evidence["source"]


def test_engine_teardown_is_a_check_naming_what_it_served(family):
    records, _, _ = family
    teardowns = [r for k, r in records.items() if r.family == "engine_teardown"]
    assert teardowns and all(t.verdict == "pass" and t.evidence["survivors"] == [] for t in teardowns)
    served = {s for t in teardowns for s in t.evidence["uses"]}
    assert {f"test_encoder_memory[{MODEL}]", f"test_encoder_memory[{MODEL}-reference]"} <= served


@pytest.mark.skipif(emulation_unavailable_reason() is None, reason="this machine can emulate a card")
def test_gpu_tier_without_a_card_fails_the_family_with_the_reason(tmp_path):
    """Without NVML the GPU tier cannot set up its card, and the family's
    checks fail (not skip) saying why. Preflight would stop such a run
    before its first check (tests/test_preflight.py): off here, to reach
    the family's own guard."""
    records, out = run_scenarios("test_encoder_memory.py", tmp_path, "--tier", "gpu",
                                 "--model", "gemma-4-e2b", "-k", "encoder_chunked or chunk_from_free",
                                 "-p", "no:harness.plugins.preflight")
    assert out.returncode == 1
    assert records and {(r.verdict, r.cause) for k, r in records.items() if k.startswith("test_")} == \
        {("fail", "premise")}
    assert all("no card to test low memory on: card emulation needs NVML" in r.message
               for k, r in records.items() if k.startswith("test_"))


def test_unknown_card_is_a_clear_error_before_any_engine(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--card", "tpu-9000"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "unknown card profile 'tpu-9000'" in out.stderr
