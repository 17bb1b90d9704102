"""The run history and "failing since"."""
from __future__ import annotations

import json
from pathlib import Path

from harness.results.history import (FlakyCount, append_history, check_durations, failing_since, flaky_counts,
                                     history_entry, last_durations, passed_last_time, read_history)
from harness.results.record import CheckRecord
from harness.results.run import RunResults

A = "scenarios/test_audio.py::test_ragged[tiny]"
B = "scenarios/test_audio.py::test_long[tiny]"
V = "scenarios/test_video.py::test_frames[tiny]"


def _run(run_id, day, tier="cpu", **verdicts):
    records = [CheckRecord(id=check, verdict=verdict) for check, verdict in verdicts.items()]
    return history_entry(run_id, RunResults(
        run={"started": f"2026-01-{day:02d}T02:00:00+00:00", "tier": tier}, records=records))


def test_streak_counts_back_to_the_last_pass(tmp_path):
    path = tmp_path / "history.jsonl"
    for entry in [_run("r1", 1, **{A: "fail", B: "pass"}), _run("r2", 2, **{A: "pass", B: "fail"}),
                  _run("r3", 3, **{A: "fail", B: "known issue"}), _run("r4", 4, **{A: "error", B: "fail"})]:
        append_history(path, entry)
    streaks = failing_since(read_history(path).entries, "r4")
    assert (streaks[A].since_run, streaks[A].runs) == ("r3", 2)
    assert (streaks[B].since_run, streaks[B].runs) == ("r2", 3)


def test_runs_without_the_check_or_of_another_tier_do_not_break_a_streak(tmp_path):
    path = tmp_path / "history.jsonl"
    for entry in [_run("r1", 1, **{A: "pass"}), _run("r2", 2, **{A: "fail"}),
                  _run("r3", 3, **{V: "pass"}),                      # audio not run
                  _run("r4", 4, tier="gpu", **{A: "pass"}),          # another tier
                  _run("r5", 5, **{A: "fail"})]:
        append_history(path, entry)
    streak = failing_since(read_history(path).entries, "r5")[A]
    assert (streak.since_run, streak.runs) == ("r2", 2)


def test_history_is_append_only_and_a_run_is_added_once(tmp_path):
    path = tmp_path / "history.jsonl"
    append_history(path, _run("r1", 1, **{A: "fail"}))
    first = path.read_bytes()
    append_history(path, _run("r1", 1, **{A: "fail"}))
    append_history(path, _run("r2", 2, **{A: "pass"}))
    assert path.read_bytes().startswith(first)
    assert [json.loads(line)["run_id"] for line in path.read_text().splitlines()] == ["r1", "r2"]


def test_unreadable_history_line_is_reported_and_the_rest_kept(tmp_path):
    path = tmp_path / "history.jsonl"
    append_history(path, _run("r1", 1, **{A: "fail"}))
    with open(path, "a") as f:
        f.write('{"run_id": "r2", "trunc')  # an append killed mid-line
    append_history(path, _run("r3", 3, **{A: "fail"}))
    history = read_history(path)
    assert [e["run_id"] for e in history.entries] == ["r1", "r3"]
    [problem] = history.problems
    assert problem.startswith(f"{path}:2: unreadable history line")
    assert failing_since(history.entries, "r3")[A].runs == 2


def _run_with(run_id, day, records, tier="cpu"):
    return history_entry(run_id, RunResults(
        run={"started": f"2026-01-{day:02d}T02:00:00+00:00", "tier": tier}, records=records))


def test_a_new_cause_restarts_the_streak(tmp_path):
    path = tmp_path / "history.jsonl"
    for entry in [_run_with("r1", 1, [CheckRecord(id=A, verdict="fail", cause="mismatch")]),
                  _run_with("r2", 2, [CheckRecord(id=A, verdict="fail", cause="mismatch")]),
                  _run_with("r3", 3, [CheckRecord(id=A, verdict="error", cause="engine-dead")]),
                  _run_with("r4", 4, [CheckRecord(id=A, verdict="error", cause="engine-dead")])]:
        append_history(path, entry)
    entries = read_history(path).entries
    assert (failing_since(entries, "r4")[A].since_run, failing_since(entries, "r4")[A].runs) == ("r3", 2)
    assert (failing_since(entries, "r2")[A].since_run, failing_since(entries, "r2")[A].runs) == ("r1", 2)


def test_a_line_from_before_causes_were_kept_breaks_no_streak(tmp_path):
    path = tmp_path / "history.jsonl"
    old = _run("r1", 1, **{A: "fail"})
    del old["causes"], old["durations"]
    append_history(path, old)
    append_history(path, _run_with("r2", 2, [CheckRecord(id=A, verdict="fail", cause="mismatch")]))
    assert failing_since(read_history(path).entries, "r2")[A].runs == 2


def test_another_shards_run_of_the_same_file_breaks_no_streak(tmp_path):
    """Shards split a module by model: a run that holds the file but not
    the check (its durations say which checks ran) passes it over."""
    other = "scenarios/test_audio.py::test_ragged[big]"
    path = tmp_path / "history.jsonl"
    for entry in [_run_with("r1", 1, [CheckRecord(id=A, verdict="fail", cause="oom")]),
                  _run_with("r2", 2, [CheckRecord(id=other, verdict="pass")]),       # shard 2/2
                  _run_with("r3", 3, [CheckRecord(id=A, verdict="fail", cause="oom")])]:
        append_history(path, entry)
    assert failing_since(read_history(path).entries, "r3")[A].runs == 2
    append_history(path, _run_with("r4", 4, [CheckRecord(id=A, verdict="pass")]))
    append_history(path, _run_with("r5", 5, [CheckRecord(id=A, verdict="fail", cause="oom")]))
    assert failing_since(read_history(path).entries, "r5")[A].runs == 1


def test_a_line_keeps_each_checks_seconds_small_and_the_newest_counts():
    records = [CheckRecord(id=A, verdict="pass", durations={"setup": 30.04, "call": 2.0, "teardown": 0.01}),
               CheckRecord(id=V, verdict="fail", cause="oom", durations={"call": 1.26})]
    entry = _run_with("r1", 1, records)
    assert entry["durations"] == {"scenarios/test_audio.py": {"test_ragged": {"tiny": 32.0}},
                                  "scenarios/test_video.py": {"test_frames": {"tiny": 1.3}}}
    assert entry["causes"] == {V: "oom"}
    newer = _run_with("r2", 2, [CheckRecord(id=A, verdict="pass", durations={"call": 5.0})])
    gpu = _run_with("r3", 3, [CheckRecord(id=A, verdict="pass", durations={"call": 99.0})], tier="gpu")
    assert last_durations([newer, entry, gpu], "cpu") == {A: 5.0, V: 1.3}


def test_every_real_check_id_comes_back_from_a_line():
    ids = (Path(__file__).parent / "data" / "scenario_check_ids_gpu.txt").read_text().split()
    ids += ["engine_teardown::01-offline-tiny-gemma4", "scenarios/test_x.py::test_plain", "scenarios/test_x.py::C::t[a-b]"]
    entry = _run_with("r1", 1, [CheckRecord(id=i, verdict="pass") for i in ids])
    assert sorted(check_durations(entry)) == sorted(ids)


def test_what_passed_last_time_is_told_from_skips_failures_and_unsupported():
    """The exit status counts `unsupported` only where the check passed in
    the tier's newest run that ran it."""
    entries = [_run("r1", 1, **{A: "pass", B: "pass", V: "pass"}),
               _run("r2", 2, **{A: "pass", B: "skip"}),
               _run("r3", 3, tier="gpu", **{A: "unsupported"}),
               _run("r4", 4, **{V: "unsupported"})]
    assert passed_last_time(entries, "cpu", {A, B, V}) == {A}
    assert "unsupported" in entries[3]["not_passing"].values()


def test_each_flaky_check_is_counted_over_the_runs_of_its_tier_that_ran_it(tmp_path):
    """A line names each flaky check with its first attempt's cause; the
    count is of runs it was flaky in, of those of its tier that ran it."""
    path = tmp_path / "history.jsonl"
    for entry in [_run("r1", 1, **{A: "flaky", B: "pass"}), _run("r2", 2, **{A: "pass", B: "fail"}),
                  _run("r3", 3, **{V: "pass"}),                          # A not run
                  _run("r4", 4, tier="gpu", **{A: "flaky"}),             # another tier
                  _run("r5", 5, **{A: "flaky", B: "flaky"})]:
        append_history(path, entry)
    entries = read_history(path).entries
    assert entries[0]["flaky"] == {A: None} and entries[1]["flaky"] == {}
    assert A not in entries[0]["not_passing"]  # it passed on its rerun
    assert flaky_counts(entries, "r5") == {A: FlakyCount(flaky=2, ran=3), B: FlakyCount(flaky=1, ran=3)}
    assert flaky_counts(entries, "r2") == {}
    assert failing_since(entries, "r5") == {}  # flaky is not failing
