"""`python -m harness report merge`: two shards' results joined into one
results.json, one report (opened in a real Chromium) and JUnit XML per
shard and merged; input that cannot be joined stops with one message and
exit status 4 (usage), writing nothing."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.__main__ import main as harness_main
from harness.results.merge import merge_run
from harness.results.record import CheckRecord
from harness.results.status import ExitStatus
from harness.results.store import RecordWriter, RunLayout
from test_report_html import _chromium, _page_data, needs_chromium, page_problems

PLAN = "0123456789abcdef"
# Engine output that must stay text in XML: markup, a CDATA end, NUL and a
# terminal escape (neither of which XML 1.0 can hold).
NASTY = "<script>x()</script> ]]> & \"q\" \x00 \x1b[31mred"


def _shard(base: Path, index: int, count: int, records: list[CheckRecord], plan: str = PLAN,
           day: int = 2, hour: int = 2) -> Path:
    """A shard's run directory as the plugins leave it; its run id is named
    after day 1 or 2 at 02:00 whatever `hour` it started (as a directory
    named alike every night would be)."""
    layout = RunLayout(base / f"shard{index}")
    writer = RecordWriter(layout, "main")
    for record in records:
        writer.append(record)
    writer.close()
    merge_run(layout, {"run_id": f"run-202601{day:02d}T02000{index}Z", "tier": "cpu", "engine": "vllm",
                       "started": f"2026-01-{day:02d}T{hour:02d}:00:0{index}+00:00",
                       "finished": f"2026-01-{day:02d}T{hour + 1:02d}:00:0{index}+00:00",
                       "shard": {"index": index, "count": count, "plan": plan, "checks": len(records)}},
              incomplete=None)
    return layout.run_dir


def _check(name: str, verdict: str, **fields) -> CheckRecord:
    return CheckRecord(id=f"scenarios/test_audio.py::{name}", family="audio", verdict=verdict,
                       durations={"setup": 1.0, "call": 2.5}, **fields)


SHARD_1 = [_check("test_a[m1]", "pass"), _check("test_b[m1]", "fail", cause="mismatch", message=NASTY,
                                                 divergence={"position": 3}, log_tail=f"ERROR {NASTY}"),
           _check("test_c[m1]", "skip", message="needs a GPU")]
SHARD_2 = [_check("test_a[m2]", "pass"), _check("test_b[m2]", "known issue", cause="engine-dead",
                                                 message="encoder call of one clip",
                                                 known_issue={"link": "https://example.invalid/1", "reason": "finding 002"}),
           _check("test_c[m2]", "error", cause="harness: KeyError", message="KeyError: 'x'"),
           _check("test_d[m2]", "unsupported", message="no LoRA for this model")]


@pytest.fixture
def merged(tmp_path) -> Path:
    dirs = [_shard(tmp_path, 1, 2, SHARD_1), _shard(tmp_path, 2, 2, SHARD_2)]
    out = tmp_path / "merged"
    assert harness_main(["report", "merge", *map(str, dirs), "-o", str(out)]) == ExitStatus.HARNESS_ERROR
    # a fail and a harness error: the merged run's status, as `report summary` gives it
    return out


def _counts(suite: ET.Element) -> dict[str, int]:
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_merge_joins_the_shards_records_and_counts(merged):
    data = json.loads((merged / "results.json").read_text())
    assert len(data["records"]) == 7
    assert data["counts"] == {"pass": 2, "fail": 1, "error": 1, "flaky": 0, "skip": 1, "known issue": 1,
                              "unsupported": 1}
    assert [s["index"] for s in data["run"]["shards"]] == [1, 2] and data["run"]["complete"] is True
    assert data["run"]["engine"] == "vllm" and data["run"]["run_id"] == f"merged-{PLAN}"


def test_junit_per_shard_and_merged_parse_and_count(merged):
    one = ET.parse(merged / "junit" / "shard-1-of-2.xml").getroot()
    two = ET.parse(merged / "junit" / "shard-2-of-2.xml").getroot()
    both = ET.parse(merged / "junit.xml").getroot()
    assert _counts(one) == {"tests": 3, "failures": 1, "errors": 0, "skipped": 1}
    assert _counts(two) == {"tests": 4, "failures": 0, "errors": 1, "skipped": 1}
    assert _counts(both) == {"tests": 7, "failures": 1, "errors": 1, "skipped": 2}
    assert [s.get("name") for s in both] == ["shard 1/2", "shard 2/2"]
    assert [_counts(s) for s in both] == [_counts(one[0]), _counts(two[0])]
    cases = {c.get("name"): c for c in both.iter("testcase")}
    assert cases["test_a[m1]"].get("classname") == "scenarios.test_audio" and cases["test_a[m1]"].get("time") == "3.500"
    # Engine output comes back as the text it was, the characters XML cannot
    # hold spelled out.
    failure = cases["test_b[m1]"].find("failure")
    spelled = NASTY.replace("\x00", "\\x00").replace("\x1b", "\\x1b")
    assert failure.get("message") == f"mismatch: {spelled}" and failure.get("type") == "mismatch"
    assert f"ERROR {spelled}" in failure.text and "first divergence: {'position': 3}" in failure.text
    # A known issue is not a failure, and says so.
    known = cases["test_b[m2]"]
    assert known.find("failure") is None and known.find("error") is None
    props = {p.get("name"): p.get("value") for p in known.iter("property")}
    assert props == {"verdict": "known issue", "cause": "engine-dead", "known_issue": "https://example.invalid/1"}
    assert known.find("system-out").text.startswith("known issue, not a failure: engine-dead: encoder call")
    assert cases["test_d[m2]"].find("skipped").get("message") == "no LoRA for this model"


@needs_chromium
def test_the_merged_report_opens_in_chromium_with_the_merged_counts(merged, tmp_path):
    done = _chromium(tmp_path, "--dump-dom", (merged / "report.html").as_uri())
    assert page_problems(done.stdout, done.stderr) == []
    counts = dict(re.findall(r'data-verdict="([a-z ]+)" data-count="(\d+)"', done.stdout))
    assert counts == {"fail": "1", "error": "1", "flaky": "0", "known issue": "1", "unsupported": "1",
                      "skip": "1", "pass": "2"}
    assert "7 of 7 checks" in done.stdout
    assert "1/2 run-20260102T020001Z (3 checks); 2/2 run-20260102T020002Z (4 checks)" in done.stdout


def test_a_missing_shard_leaves_the_merge_incomplete(tmp_path, capsys):
    dirs = [_shard(tmp_path, 1, 3, SHARD_1), _shard(tmp_path, 3, 3, SHARD_2)]
    assert harness_main(["report", "merge", *map(str, dirs), "-o", str(tmp_path / "out")]) == ExitStatus.HARNESS_ERROR
    run = json.loads((tmp_path / "out" / "results.json").read_text())["run"]
    assert run["complete"] is False and run["incomplete_reason"] == "shards missing: 2/3"
    assert "INCOMPLETE" in capsys.readouterr().out


def test_what_every_shard_records_alike_joins(tmp_path):
    """Each shard's pool numbers its engines from 01, and each shard
    collects every module: teardown checks are told apart by shard, a
    collection error is kept once."""
    def alike(index):
        return [CheckRecord(id="engine_teardown::01-offline-tiny", family="engine_teardown", verdict="pass"),
                CheckRecord(id="scenarios/test_broken.py", family="broken", verdict="error",
                            cause="harness: collection error")]
    dirs = [_shard(tmp_path, i, 2, alike(i) + ([SHARD_1, SHARD_2][i - 1])) for i in (1, 2)]
    assert harness_main(["report", "merge", *map(str, dirs), "-o", str(tmp_path / "out")]) == ExitStatus.HARNESS_ERROR
    ids = [r["id"] for r in json.loads((tmp_path / "out" / "results.json").read_text())["records"]]
    assert len(ids) == 10 and ids.count("scenarios/test_broken.py") == 1
    assert {"engine_teardown::shard1of2-01-offline-tiny", "engine_teardown::shard2of2-01-offline-tiny"} <= set(ids)


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    one = _shard(tmp_path / "a", 1, 2, SHARD_1)
    two = _shard(tmp_path / "a", 2, 2, SHARD_2)
    other_plan = _shard(tmp_path / "b", 2, 2, SHARD_2, plan="fedcba9876543210")
    overlapping = _shard(tmp_path / "c", 2, 2, SHARD_1[:1])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "results.json").write_text(json.dumps({"schema": 1, "run": {"run_id": "r"}, "records": []}))
    (tmp_path / "notes.txt").write_text("not results\n")
    return {
        "missing dir": ([str(one), str(tmp_path / "nope")], "no such results file"),
        "not a results file": ([str(one), str(tmp_path / "notes.txt")], "not a readable results file"),
        "different runs": ([str(one), str(other_plan)], "are shards of different runs"),
        "a shard twice": ([str(one), str(one / "results.json")], "shard 1/2 given twice"),
        "a check twice": ([str(one), str(overlapping)], "is in two shards"),
        "not a shard": ([str(one), str(plain)], "not a shard's results"),
        "output holds results": ([str(one), str(two), "-o", str(one)], "already holds a results.json"),
        "output is a file": ([str(one), str(two), "-o", str(tmp_path / "notes.txt")], "not a directory"),
    }


def test_bad_input_stops_with_one_message_and_writes_nothing(tmp_path, capsys):
    cases = _bad_inputs(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for case, (args, says) in cases.items():
        out = [] if "-o" in args else ["-o", str(tmp_path / "out")]
        assert harness_main(["report", "merge", *args, *out]) == ExitStatus.USAGE, case
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and err[0].startswith("error: ") and says in err[0], (case, err)
        assert err[1] == "mmharness: exit status 4 (usage or set-up error)", (case, err)
    assert not (tmp_path / "out").exists()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_merge_history_adds_each_shard_once_and_counts_failing_since(tmp_path):
    history = tmp_path / "history.jsonl"
    old = _shard(tmp_path / "old", 1, 1, [_check("test_b[m1]", "fail", cause="mismatch")], plan="old", day=1)
    assert harness_main(["report", "merge", str(old), "-o", str(tmp_path / "m0"), "--history", str(history)]) == 1
    dirs = [_shard(tmp_path, 1, 2, SHARD_1), _shard(tmp_path, 2, 2, SHARD_2)]
    for out in ("m1", "m2"):  # merged twice: each shard's line is added once
        harness_main(["report", "merge", *map(str, dirs), "-o", str(tmp_path / out), "--history", str(history)])
    ids = [json.loads(line)["run_id"] for line in history.read_text().splitlines()]
    assert ids == ["run-20260101T020001Z", "run-20260102T020001Z", "run-20260102T020002Z"]
    # A later night's shard in a directory named as an earlier run's would
    # be left out of the history: refused, before anything is written.
    reused = _shard(tmp_path / "night3", 1, 1, SHARD_1, plan="night3", day=1, hour=4)
    written = history.read_bytes()
    assert harness_main(["report", "merge", str(reused), "-o", str(tmp_path / "m3"), "--history", str(history)]) == ExitStatus.USAGE
    assert history.read_bytes() == written and not (tmp_path / "m3").exists()
    since = {r["id"].split("::")[1]: r.get("since") for r in _page_data(tmp_path / "m2" / "report.html")["records"]}
    assert since["test_b[m1]"] == "failing since run-20260101T020001Z (2 runs)"
    assert since["test_c[m2]"] == "new in this run"


def test_the_merged_report_links_each_shards_files_where_they_are_now(tmp_path):
    """A shard recorded its files on its own machine; merged from a download
    elsewhere, the report links them in the shard directory as given."""
    failing = _check("test_b[m1]", "fail", cause="mismatch",
                     log_path="/ci/agent-3/reports/run-20260102T020001Z/logs/test_b.log",
                     timeline_path="/ci/agent-3/reports/run-20260102T020001Z/timelines/test_b.csv")
    dirs = [_shard(tmp_path / "shards", 1, 2, [failing]), _shard(tmp_path / "shards", 2, 2, SHARD_2[:1])]
    (dirs[0] / "logs").mkdir(exist_ok=True)
    (dirs[0] / "logs" / "test_b.log").write_text("the slice\n")
    out = tmp_path / "merged"
    harness_main(["report", "merge", *map(str, dirs), "-o", str(out)])
    [record] = [r for r in json.loads((out / "results.json").read_text())["records"] if r["verdict"] == "fail"]
    assert record["log_path"] == "../shards/shard1/logs/test_b.log"
    assert record["timeline_path"] == "../shards/shard1/timelines/test_b.csv"
    assert (out / record["log_path"]).read_text() == "the slice\n"
    assert 'href="../shards/shard1/logs/test_b.log"' in (out / "report.html").read_text()
