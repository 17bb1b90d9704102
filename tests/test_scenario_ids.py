"""Check ids are what known-issue patterns and "failing since" key on: a
redesign of the plumbing must not change them. The lists in tests/data were
collected before the scenario runner replaced the hand-written plumbing;
since then only checks that could not fail have gone (test_premise_lengths
and test_non_empty, folded into test_one_pass and the invariance checks),
and the low-memory family's per-shape image invariance became one check of
every prompt per chunk setting (test_batch_invariance_on_card,
test_chunk_boundary_invariance), and the vision-LoRA family's TP sizes an
entry never runs (its `lora.tp_sizes`) are no longer collected; the fuzz
family's checks (one per `fuzz = true` entry), the soak family's (one
set per `soak = true` entry) and the cache matrix's (one set per cell of
the pairwise subset, per `cache = true` entry) were added, and those of the audio zoo's
entries (tiny-qwen2-audio and on), and the ragged family's placeholder
count (test_placeholders_as_the_processor), and the ragged-images family
(every image entry, and tiny-qwen2-5-vl). The ids are
`make run`'s selection (`--stress`)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tier", ["cpu", "gpu"])
def test_scenario_check_ids_are_unchanged(tier):
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--collect-only", "-q", "--stress",
                          "--tier", tier], cwd=ROOT, capture_output=True, text=True, timeout=300)
    collected = [line for line in out.stdout.splitlines() if "::" in line]
    expected = (ROOT / "tests" / "data" / f"scenario_check_ids_{tier}.txt").read_text().splitlines()
    # The ids, not their order: the engines plugin groups each module's
    # checks by model, so that a model's engines can be retired early.
    assert sorted(collected) == sorted(expected), out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.parametrize("value, says", [
    ("abc", "comma-separated seconds"),
    ("-1,2", "each above 0"),
    ("1,1", "at least two different durations"),
    ("3", "at least two different durations"),
])
def test_bad_audio_durations_stop_before_any_engine(value, says, tmp_path):
    """A bad value is a usage error at start: no engine, no record, one message."""
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios/test_ragged_audio.py",
                          f"--audio-durations={value}", "--results-dir", str(tmp_path / "run")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == pytest.ExitCode.USAGE_ERROR, out.stdout[-2000:] + out.stderr[-2000:]
    assert says in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "engines").exists()


def test_model_selects_entries_by_exact_name():
    """--model tiny-gemma4 is that entry alone (-k would also take tiny-gemma4-awq);
    an unknown name stops the run with the names it knows."""
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--collect-only", "-q",
                          "--model", "tiny-gemma4"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert ids and not any("awq" in i or "conformer" in i or "gemma3n" in i for i in ids), ids
    bad = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--collect-only", "-q", "--model", "nope"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR and "no cpu-tier entry named ['nope']" in bad.stderr


def test_a_tp_size_in_k_selects_that_size_only():
    """The harness's own runs select TP 1 with `-k tp1`; -k also matches
    marker names, so no marker may name a TP size (a TP 2 engine is about
    12x slower on the CPU tier)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios/test_vision_lora.py", "--collect-only", "-q",
                          "--model", "tiny-gemma4", "-k", "tp1"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    ids = [line for line in out.stdout.splitlines() if "::" in line]
    assert ids and all("[tp1-" in i for i in ids), [i for i in ids if "[tp1-" not in i]
