"""`pytest --shard I/N` on a small synthetic suite, in real pytest
processes: shards are disjoint, cover the suite, keep each module x model
(x TP) group whole, report the rest as deselected, follow the history's
durations, and write the shard into the run's metadata."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.__main__ import main as harness_main
from harness.results.history import append_history, history_entry
from harness.results.record import CheckRecord
from harness.results.run import RunResults

ROOT = Path(__file__).resolve().parents[1]

SUITE = {
    "conftest.py": 'pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", "harness.plugins.shard"]\n',
    "scenarios/conftest.py": '''
import collections
import pytest
Entry = collections.namedtuple("Entry", "name")

def pytest_generate_tests(metafunc):
    # As the engines plugin does: one module-scoped model_entry per model.
    if "model_entry" in metafunc.fixturenames:
        entries = [Entry(n) for n in ("m-a", "m-b", "m-c")]
        metafunc.parametrize("model_entry", entries, ids=[e.name for e in entries], scope="module")
''',
    "scenarios/test_audio.py": '''
import pytest

@pytest.mark.parametrize("clip", range(4))
def test_clip(model_entry, clip):
    pass

def test_alive(model_entry):
    pass
''',
    "scenarios/test_lora.py": '''
import pytest

@pytest.fixture(scope="module", params=[1, 2], ids=lambda tp: f"tp{tp}")
def tp(request):
    return request.param

def test_effect(tp, model_entry):
    pass

def test_fails(tp, model_entry):
    assert (tp, model_entry.name) != (2, "m-c"), "a finding"
''',
    "scenarios/test_plain.py": "def test_no_model():\n    pass\n",
}


@pytest.fixture
def suite(tmp_path) -> Path:
    for name, text in SUITE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def _pytest(suite: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider",
                           "--history", str(suite / "history.jsonl"), *args],
                          cwd=suite, env=env, capture_output=True, text=True, timeout=120)


def _collected(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stdout.splitlines() if "::" in line]


def _group(check: str) -> tuple:
    """Module, model and TP size, read back from the id."""
    module, params = check.split("::")[0], re.search(r"\[(.*)\]", check)
    words = params.group(1).split("-") if params else []
    return module, next((f"m-{w}" for w in words if w in "abc"), None), next((w for w in words if w.startswith("tp")), None)


def test_shards_cover_the_suite_disjointly_and_keep_groups_whole(suite):
    # Measured durations: the m-a audio group is the longest by far, so
    # longest-first gives it a shard of its own.
    whole = _collected(_pytest(suite, "--collect-only", "-q"))
    records = [CheckRecord(id=c, verdict="pass", durations={"call": 60.0 if "test_audio" in c and "m-a" in c else 1.0})
               for c in whole]
    append_history(suite / "history.jsonl", history_entry("r0", RunResults(run={"tier": None}, records=records)))

    shards = []
    for index in (1, 2, 3):
        done = _pytest(suite, "--collect-only", "-q", f"--shard={index}/3")
        assert done.returncode == 0, done.stdout + done.stderr
        shards.append(_collected(done))
        # pytest itself counts the other shards' checks as deselected.
        assert f"{len(shards[-1])}/{len(whole)} tests collected ({len(whole) - len(shards[-1])} deselected)" in done.stdout
    assert len(whole) == 28 and sorted(c for s in shards for c in s) == sorted(whole)
    owner = {}
    for index, shard in enumerate(shards):
        for check in shard:
            assert owner.setdefault(_group(check), index) == index, f"{_group(check)} split across shards"
    heavy = [s for s in shards if any("test_audio" in c and "m-a" in c for c in s)]
    assert heavy == [[c for c in whole if "test_audio" in c and "m-a" in c]]


def test_shard_runs_merge_into_one_run(suite, tmp_path, capsys):
    """Two shard processes plan alike (one fingerprint), write the shard
    into results.json and no history line; the merge adds both lines."""
    runs = []
    for index in (1, 2):
        done = _pytest(suite, f"--shard={index}/2", "--results-dir", str(suite / f"shard{index}"))
        runs.append(json.loads((suite / f"shard{index}" / "results.json").read_text()))
        failed = any(r["verdict"] == "fail" for r in runs[-1]["records"])
        assert done.returncode == (1 if failed else 0), done.stdout + done.stderr
    shards = [r["run"]["shard"] for r in runs]
    assert [s["index"] for s in shards] == [1, 2] and shards[0]["plan"] == shards[1]["plan"]
    assert sum(s["checks"] for s in shards) == 28 == sum(len(r["records"]) for r in runs)
    assert not (suite / "history.jsonl").exists()

    out = tmp_path / "merged"
    assert harness_main(["report", "merge", str(suite / "shard1"), str(suite / "shard2"), "-o", str(out),
                         "--history", str(suite / "history.jsonl")]) == 1  # the suite holds one failure
    merged = json.loads((out / "results.json").read_text())
    assert merged["counts"]["pass"] == 27 and merged["counts"]["fail"] == 1 and merged["run"]["complete"]
    lines = (suite / "history.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["run_id"] for line in lines) == sorted(r["run"]["run_id"] for r in runs)
    assert "FAILED: 1 fail, 27 pass (28 checks)" in capsys.readouterr().out


@pytest.mark.parametrize("workers", ["0", "1"])
def test_shards_split_the_selection_and_an_empty_one_passes(suite, workers):
    """-k leaves one group: one of two shards holds it, the other nothing,
    and did its part (exit 0, not "no tests collected"), with xdist too,
    whose controller collects nothing itself."""
    done = [_pytest(suite, "-n", workers, "-k", "test_no_model", f"--shard={i}/2",
                    "--results-dir", str(suite / f"s{i}")) for i in (1, 2)]
    assert [d.returncode for d in done] == [0, 0], [d.stdout + d.stderr for d in done]
    held = sorted(len(json.loads((suite / f"s{i}" / "results.json").read_text())["records"]) for i in (1, 2))
    assert held == [0, 1]


def test_a_bad_shard_value_stops_the_run(suite):
    bad = _pytest(suite, "--collect-only", "--shard=3/2")
    assert bad.returncode == pytest.ExitCode.USAGE_ERROR and "expected I/N" in bad.stderr


CHECKER = """
from harness.models import models_for
from harness.plugins.engines import ENGINES
from harness.schedule.retirement import engine_group_key
from harness.schedule.shards import group_of_check_id
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    kept = {item.nodeid for item in session.items}
    ends = session.config.stash[ENGINES].last_checks
    print("LAST CHECKS KEPT", len(ends), all(nodeid in kept for nodeid in ends), len(kept))
    names = [e.name for e in models_for("cpu")]
    print("KEYS AGREE", all(engine_group_key(i) == group_of_check_id(i.nodeid, names) for i in session.items))
"""


# The root conftest's plugins, last first: registered this way by -p before
# the conftest lists them, so whatever rests on registration order shows.
REVERSED = [arg for plugin in ["progress", "preflight", "card", "engines", "shard", "report", "records", "run", "hooks"]
            for arg in ("-p", f"harness.plugins.{plugin}")]


@pytest.mark.parametrize("order", [[], REVERSED], ids=["conftest-order", "reverse-order"])
def test_engines_are_retired_after_the_last_check_the_shard_kept(tmp_path, order):
    """The engines plugin notes each group's last check after the shard
    has deselected, whatever order the plugins were registered in: noted on
    a check of another shard, an engine would outlive its group. And an
    item's group, from its parameters, is the one its id reads as (the
    reading the id-list tests and the benchmark use)."""
    (tmp_path / "shard_checker.py").write_text(CHECKER)
    done = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "--collect-only", "-q", *order,
                           "-p", "shard_checker",
                           "-p", "no:cacheprovider", "--shard=2/3", "--history", str(tmp_path / "none.jsonl")],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True,
                          text=True, timeout=120)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("LAST CHECKS KEPT")]
    _, noted, kept_only, kept = line.rsplit(" ", 3)
    assert int(noted) > 1 and kept_only == "True" and 0 < int(kept) < 357, done.stdout[-2000:] + done.stderr
    assert "KEYS AGREE True" in done.stdout


ORDER_SUITE = {
    "conftest.py": '''
from pathlib import Path
pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records",
                  "harness.plugins.engines"]

def pytest_collection_finish(session):
    if hasattr(session.config, "workerinput"):
        worker = session.config.workerinput["workerid"]
        Path(f"order-{worker}.txt").write_text("\\n".join(i.nodeid.split("::")[0] for i in session.items))
''',
    "scenarios/test_long.py": "import pytest\n\n@pytest.mark.parametrize('i', range(3))\ndef test_a(i):\n    pass\n",
    "scenarios/test_short.py": "def test_b():\n    pass\n",
    "scenarios/test_quiet.py": "import pytest\n\npytestmark = pytest.mark.alone\n\ndef test_c():\n    pass\n",
}


def test_xdist_workers_take_the_longest_modules_first_and_those_alone_before_them(tmp_path):
    """`make run`'s order (--dist loadscope --no-loadscope-reorder): the
    module marked `alone` first; then with no history, the module of most
    checks first, with one, the longest; every worker in one order."""
    for name, text in ORDER_SUITE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    def order() -> list[str]:
        done = _pytest(tmp_path, "-p", "xdist", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder",
                       "--results-dir", str(tmp_path / "run"))
        orders = {p.read_text() for p in tmp_path.glob("order-gw*.txt")}
        assert len(orders) == 1, done.stdout + done.stderr
        return list(dict.fromkeys(orders.pop().splitlines()))

    assert order() == ["scenarios/test_quiet.py", "scenarios/test_long.py", "scenarios/test_short.py"]
    (tmp_path / "history.jsonl").unlink()
    records = [CheckRecord(id=c, verdict="pass", durations={"call": 500.0 if "short" in c else 1.0})
               for c in ["scenarios/test_short.py::test_b", "scenarios/test_quiet.py::test_c"]
               + [f"scenarios/test_long.py::test_a[{i}]" for i in range(3)]]
    append_history(tmp_path / "history.jsonl", history_entry("r0", RunResults(run={"tier": None}, records=records)))
    assert order() == ["scenarios/test_quiet.py", "scenarios/test_short.py", "scenarios/test_long.py"]
