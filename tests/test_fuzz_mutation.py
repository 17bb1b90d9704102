"""The fuzzer against a fault switched on inside the real engine: a padding
leak that acts only on audio encoder calls of clips of different lengths
(the seed bug's kind, at LEAK_SCALE: a shift of a tiny fraction of the
embedding). Within its default budget the fuzzer finds it, shrinks it to
two clips of different lengths, and leaves a replay command and a
standalone repro.py that each reproduce it on the faulted engine (and the
repro.py imports nothing of the harness)."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engines.faults import FAULTS_ENV, SCALE_ENV
from harness.fuzz.session import BUDGET_S
from harness.compat import SITE_DIR
from harness.results.run import load_results
from tests.scenario_runs import ROOT, run_scenarios
from tests.test_mutations import LEAK_SCALE, MODEL, fault_test

FAULT_ARGS = ("--inject-faults=padding-leak", f"--fault-scale={LEAK_SCALE}")
# The shrink is given longer than make run's minute: the shrink to two clips
# took about 115 s here (make nightly shrinks for FUZZ_SHRINK).
SHRINK_S = 180.0
CHECK = f"test_fuzz_batches[{MODEL}]"


@pytest.fixture(scope="module")
def leak(tmp_path_factory):
    """The fuzz check's record on the leaking engine, exploring for the
    default budget, as make run does, and shrinking for SHRINK_S."""
    tmp = tmp_path_factory.mktemp("fuzz-leak")
    records, out = run_scenarios("test_fuzz_multimodal.py", tmp, "--model", MODEL, "-k", "fuzz_batches",
                                 *FAULT_ARGS, "--fuzz-seed=1", f"--fuzz-db={tmp / 'db'}", f"--fuzz-budget={BUDGET_S}",
                                 f"--fuzz-shrink={SHRINK_S}")
    assert CHECK in records, out.stdout[-3000:]
    return records[CHECK], tmp


def _durations(spec: dict) -> list[int]:
    return [it["duration_cs"] for r in spec["requests"] for it in r["items"] if it["kind"] == "audio"]


@fault_test
def test_the_fuzzer_finds_the_leak_and_shrinks_it_to_two_clips_of_different_lengths(leak):
    rec, _ = leak
    assert (rec.verdict, rec.cause) == ("fail", "mismatch"), rec.message
    fuzz = rec.evidence["fuzz"]
    # Found within the default budget: drawn inside it (an example drawn in
    # time is judged to its end, past the budget).
    assert fuzz["budget_s"] == BUDGET_S and fuzz["first_failure_drawn_s"] <= BUDGET_S, fuzz
    [mismatch] = [f for f in rec.evidence["shrunk"] if f["cause"] == "mismatch"]
    spec = mismatch["spec"]
    assert len(spec["requests"]) == 2 and all(len(r["items"]) == 1 for r in spec["requests"]), spec
    assert len(set(_durations(spec))) == 2, spec
    assert rec.message.startswith("shrunk to 2 req · audiox2 · ragged audio: input r")


@fault_test
def test_the_replay_command_and_repro_py_each_reproduce_it(leak):
    """Both run at once (two engine pairs on the machine): the replay as a
    check of its own fails with the recorded cause and message; repro.py,
    under the engine's interpreter with the same fault on, says REPRODUCED
    and names the request and position the record does."""
    rec, tmp = leak
    [written] = [w for w in rec.evidence["reproducers"] if "mismatch" in Path(w["workload"]).read_text()]
    recorded = json.loads(Path(written["workload"]).read_text())
    replay = shlex.split(written["replay"])
    replay_run = subprocess.Popen([*replay, "--results-dir", str(tmp / "replay"), "--history",
                                   str(tmp / "replay-history.jsonl"), *FAULT_ARGS],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    script = Path(written["repro"])
    env = {**os.environ, "PYTHONPATH": str(SITE_DIR), FAULTS_ENV: "padding-leak", SCALE_ENV: repr(LEAK_SCALE)}
    repro = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, capture_output=True, text=True,
                           timeout=900)
    replay_out, _ = replay_run.communicate(timeout=900)

    [replayed] = [r for r in load_results(tmp / "replay" / "results.json").records
                  if r.id.endswith(f"test_fuzz_replay[{MODEL}]")]
    assert (replayed.verdict, replayed.cause) == ("fail", "mismatch"), replay_out[-3000:]
    assert replayed.message == recorded["message"]

    label = recorded["message"].split("input ", 1)[1].split(":", 2)[:2]
    assert repro.returncode == 1, repro.stdout[-2000:] + repro.stderr[-2000:]
    assert "REPRODUCED: 1 of 2 requests differ batched from alone" in repro.stdout, repro.stdout
    assert f"{':'.join(label)}: position" in repro.stdout, repro.stdout
    source = script.read_text()
    assert "import harness" not in source and "from harness" not in source
