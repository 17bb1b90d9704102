"""Engine starts counted in the run (harness.results.starts): the lines the
workers append become the merged results' `engine_starts`, the run's last
lines and a row of the report's metadata."""
from __future__ import annotations

import json
from pathlib import Path

from harness.report.sections import metadata_rows
from harness.report.summary import summary_lines
from harness.results.merge import merge_run
from harness.results.record import CheckRecord
from harness.results.starts import append_start, starts_line, starts_summary
from harness.results.store import RecordWriter, RunLayout

STARTED, FINISHED = "2026-12-06T04:00:00+00:00", "2026-12-06T04:10:00+00:00"  # 600 s


def _start(seconds, outcome="ready", ahead=False, worker="gw0", waited_s=0.0):
    return {"worker": worker, "kind": "offline", "name": "tiny", "log": "x.log", "seconds": seconds,
            "outcome": outcome, "ahead": ahead, "waited_s": waited_s}


def test_starts_are_counted_with_their_seconds_and_share_of_every_workers_time(tmp_path):
    """A wait for the engine turn (another worker's `alone` module) is
    counted apart, and is no share of the run the starts took."""
    path = tmp_path / "engines" / "starts.jsonl"
    for line in (_start(50.0), _start(70.0, ahead=True, worker="gw1", waited_s=20.0),
                 _start(12.5, "retrying: port race"), _start(67.5, "failed: oom")):
        append_start(path, line)
    summary = starts_summary(path, STARTED, FINISHED, workers=2)
    assert summary == {"count": 4, "seconds": 200.0, "waited_s": 20.0, "not_ready": 2, "ahead": 1,
                       "share": round(180 / 1200, 3), "workers": 2, "wall_s": 600.0}
    assert starts_line(summary) == ("mmharness: 4 engine starts (2 not ready), 200 s in all (20 s of it waiting "
                                    "for devices), 15% of 2 worker(s) × 600 s")


def test_a_run_without_engines_has_no_starts_and_a_cut_line_is_left_out(tmp_path):
    path = tmp_path / "starts.jsonl"
    assert starts_summary(path, STARTED, FINISHED, workers=1) is None
    assert starts_line(None) is None
    append_start(path, _start(40.0))
    with open(path, "ab") as f:
        f.write(b'{"worker": "gw0", "seconds": 3')  # a worker killed mid-line
    assert starts_summary(path, None, None, workers=1) == {"count": 1, "seconds": 40.0, "waited_s": 0.0,
                                                           "not_ready": 0, "ahead": 0}
    assert starts_line(starts_summary(path, None, None, workers=1)) == "mmharness: 1 engine starts, 40 s in all"


def test_the_merged_run_carries_its_starts_into_the_last_lines_and_the_report(tmp_path):
    layout = RunLayout(tmp_path)
    RecordWriter(layout, "gw0").append(CheckRecord(id="a", verdict="pass"))
    for worker in ("gw0", "gw1"):
        layout.metadata_file(worker).write_text(json.dumps({"workers": 2}))
    append_start(layout.engine_starts, _start(300.0))
    append_start(layout.engine_starts, _start(300.0, worker="gw1"))

    results = merge_run(layout, {"started": STARTED, "finished": FINISHED}, incomplete=None)

    assert results.run["engine_starts"]["share"] == 0.5
    line = "mmharness: 2 engine starts, 600 s in all, 50% of 2 worker(s) × 600 s"
    assert summary_lines(results, Path("report.html"))[-2:] == [line, "mmharness: report: report.html"]
    assert ("engine starts", line.removeprefix("mmharness: ")) in metadata_rows(results.run)
    assert not any(key in ("engine_starts", "workers") for key, _ in metadata_rows(results.run))
