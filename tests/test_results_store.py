"""The record store: append, survive a kill, merge, refuse bad input clearly."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.verdicts import Verdict
from harness.results.merge import merge_run
from harness.results.record import CheckRecord
from harness.results.run import ResultsError, load_results
from harness.results.store import RecordWriter, RunLayout, read_records

REPO = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from harness.results.record import CheckRecord
    from harness.results.store import RecordWriter, RunLayout
    writer = RecordWriter(RunLayout(Path(sys.argv[1])), "gw0")
    i = 0
    while True:  # until killed
        writer.append(CheckRecord(id=f"check-{i}", verdict="pass", outputs="x" * (i % 4000)))
        print(i, flush=True)
        i += 1
""")


def test_records_written_before_sigkill_survive(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    acknowledged = -1
    try:
        while acknowledged < 200:
            acknowledged = int(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    read = read_records([RunLayout(tmp_path).records_file("gw0")])
    ids = [r.id for r in read.records]
    # Every record acknowledged before the kill is there, intact and in order.
    assert ids[: acknowledged + 1] == [f"check-{i}" for i in range(acknowledged + 1)]
    assert all(r.outputs == "x" * (i % 4000) for i, r in enumerate(read.records))
    # The writer may have been mid-line: at most that one line is reported.
    assert len(read.problems) <= 1


def _write(layout: RunLayout, worker: str, *records: CheckRecord) -> None:
    writer = RecordWriter(layout, worker)
    for record in records:
        writer.append(record)
    writer.close()


def test_merge_across_workers(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "gw0", CheckRecord(id="b", verdict="pass", worker="gw0"),
           CheckRecord(id="c", verdict="fail", cause="oom", worker="gw0"))
    _write(layout, "gw1", CheckRecord(id="a", verdict="skip", worker="gw1"))
    _write(layout, "gw2", CheckRecord(id="d", verdict="known issue", cause="mismatch", worker="gw2"))
    layout.metadata_file("gw0").write_text(json.dumps({"engine_version": "0.9.1"}))
    layout.metadata_file("gw1").write_text(json.dumps({"engine_version": "0.9.1", "device": "cpu"}))

    merged = merge_run(layout, {"command": "pytest scenarios"}, incomplete=None)
    assert [r.id for r in merged.records] == ["a", "b", "c", "d"]
    assert merged.counts == {"pass": 1, "fail": 1, "error": 0, "flaky": 0, "skip": 1, "known issue": 1,
                             "unsupported": 0}
    assert merged.run == {"command": "pytest scenarios", "engine_version": "0.9.1", "device": "cpu",
                          "complete": True}
    assert not merged.green  # "c" failed

    again = load_results(tmp_path)
    assert again.to_json() == merged.to_json()
    assert again.records[2].cause == "oom"


def test_workers_disagreeing_on_metadata_keep_both_values(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "gw0", CheckRecord(id="a", verdict="pass"))
    layout.metadata_file("gw0").write_text(json.dumps({"engine_version": "0.9.1"}))
    layout.metadata_file("gw1").write_text(json.dumps({"engine_version": "0.9.2"}))
    assert merge_run(layout, {}, incomplete=None).run["engine_version"] == ["0.9.1", "0.9.2"]


def test_corrupt_and_unfinished_lines_are_reported_and_nothing_else_is_lost(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "gw0", CheckRecord(id="a", verdict="pass"))
    path = layout.records_file("gw0")
    with open(path, "ab") as f:
        f.write(b'{"id": "broken", "verdict": \n')
        f.write(json.dumps(CheckRecord(id="b", verdict="fail").to_json()).encode() + b"\n")
        f.write(b'{"id": "half-writ')
    before = path.read_bytes()

    merged = merge_run(layout, {}, incomplete=None)
    assert [r.id for r in merged.records] == ["a", "b"]
    assert len(merged.problems) == 2
    assert f"{path}:2: unreadable record" in merged.problems[0]
    assert f"{path}:4: unfinished record" in merged.problems[1]
    assert not merged.green
    assert path.read_bytes() == before  # the worker file is evidence: never rewritten


def test_restarted_writer_does_not_glue_its_record_to_a_cut_line(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "gw0", CheckRecord(id="a", verdict="pass"))
    with open(layout.records_file("gw0"), "ab") as f:
        f.write(b'{"id": "killed-mid-wri')
    _write(layout, "gw0", CheckRecord(id="b", verdict="fail"))  # the replacement worker
    read = read_records([layout.records_file("gw0")])
    assert [r.id for r in read.records] == ["a", "b"]
    assert len(read.problems) == 1 and ":2: unreadable record" in read.problems[0]


def test_record_with_a_missing_id_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "main.jsonl"
    path.write_text('{"verdict": "pass"}\n')
    read = read_records([path])
    assert read.records == []
    assert "string 'id'" in read.problems[0]


def test_parameters_become_json_when_written(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "main", CheckRecord(id="x", params={"dtype": Verdict.PASS, "path": tmp_path,
                                                      "sizes": (1, 2), "nan": float("nan")}))
    [record] = read_records([layout.records_file("main")]).records
    assert record.params == {"dtype": "pass", "path": str(tmp_path), "sizes": [1, 2], "nan": "nan"}


@pytest.mark.parametrize("content, expected", [
    (None, "no such results file"),
    ("{not json", "not a readable results file"),
    ('{"schema": 99}', "expected a results.json of schema 1"),
    ('{"schema": 1, "records": [{"verdict": "pass"}]}', "record #0 is malformed"),
])
def test_loading_bad_results_names_the_problem(tmp_path, content, expected):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ResultsError, match=expected):
        load_results(path)


def test_merge_marks_a_run_that_did_not_go_to_its_end(tmp_path):
    layout = RunLayout(tmp_path)
    _write(layout, "main", CheckRecord(id="a", verdict="pass"))
    layout.metadata_file("main").write_text(json.dumps({"checks_collected": 3}))
    cut = merge_run(layout, {"run_id": "r"}, incomplete="interrupted (Ctrl-C / SIGINT)")
    assert (cut.run["complete"], cut.run["incomplete_reason"]) == (False, "interrupted (Ctrl-C / SIGINT)")
    assert cut.incompleteness == "interrupted (Ctrl-C / SIGINT): 1 of 3 checks recorded"
    assert not cut.green  # its one check passed, but two never ran
    # Merged again as complete (a re-render of a finished run), no stale reason stays.
    again = merge_run(layout, load_results(tmp_path).run, incomplete=None)
    assert again.complete and "incomplete_reason" not in again.run and again.green
