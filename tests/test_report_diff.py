"""Run-to-run diff, as a function, on the command line and in the page."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.__main__ import main
from harness.report.diff import diff_runs, format_diff
from harness.report.html import render_report
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.results.status import ExitStatus
from harness.results.store import write_results_atomic
from harness.units import GiB

REPO = Path(__file__).resolve().parents[1]


def _runs() -> tuple[RunResults, RunResults]:
    def rec(check, verdict, cause=None, peak=None):
        return CheckRecord(id=f"scenarios/test_x.py::{check}", verdict=verdict, cause=cause,
                           message=f"{check} went {verdict}",
                           peak_memory={"cuda:0": int(peak * GiB)} if peak else {})
    old = RunResults(run={"run_id": "run-old", "engine": "vllm", "engine_version": "0.9.1",
                          "torch": "2.5.1", "cpu_model": "Xeon", "complete": True}, records=[
        rec("test_breaks", "pass", peak=10.0),
        rec("test_fixed", "fail", "oom", peak=20.0),
        rec("test_still", "error", "engine-dead"),
        rec("test_known_then_fixed", "known issue", "mismatch"),
        rec("test_grows", "pass", peak=10.0),
        rec("test_wobbles", "pass", peak=10.0),
        rec("test_removed", "fail", "leak"),
    ])
    new = RunResults(run={"run_id": "run-new", "engine": "vllm", "engine_version": "0.9.2",
                          "torch": "2.5.1", "cpu_model": "Xeon", "complete": True}, records=[
        rec("test_breaks", "fail", "mismatch", peak=10.0),
        rec("test_fixed", "pass", peak=14.0),
        rec("test_still", "error", "engine-dead"),
        rec("test_known_then_fixed", "pass"),
        rec("test_grows", "pass", peak=11.5),
        rec("test_wobbles", "pass", peak=10.5),
        rec("test_added", "fail", "timeout"),
    ])
    return old, new


def _names(pairs):
    return sorted(pair[0].id.split("::")[1] for pair in pairs)


def test_diff_sorts_checks_into_new_fixed_and_still_failing():
    diff = diff_runs(*_runs(), memory_pct=10)
    assert _names(diff.new_failures) == ["test_added", "test_breaks"]
    assert dict((r.id.split("::")[1], was) for r, was in diff.new_failures) == {
        "test_added": None, "test_breaks": "pass"}
    assert _names(diff.fixed) == ["test_fixed", "test_known_then_fixed"]
    assert _names(diff.still_failing) == ["test_still"]


def test_diff_lists_memory_peaks_moved_beyond_the_threshold():
    moves = diff_runs(*_runs(), memory_pct=10).memory_moves
    assert [(m.check.split("::")[1], round(m.percent, 1)) for m in moves] == [
        ("test_fixed", -30.0), ("test_grows", 15.0)]          # not test_wobbles at +5%
    assert [m.check.split("::")[1] for m in diff_runs(*_runs(), memory_pct=4).memory_moves] == [
        "test_fixed", "test_grows", "test_wobbles"]


def test_diff_text_shows_both_engines_side_by_side():
    text = format_diff(diff_runs(*_runs(), memory_pct=10))
    assert "  ≠ engine_version       0.9.1    0.9.2\n" in text
    assert "    torch                2.5.1    2.5.1\n" in text
    assert "New failures (2)" in text and "Fixed (2)" in text and "Still failing (1)" in text
    assert "test_grows  cuda:0  10.00 GiB -> 11.50 GiB (+15.0%)" in text


EPYC = {"vendor": "AuthenticAMD", "family": "25", "model": "1", "stepping": "1", "model_name": "AMD EPYC"}
EPYC_LABEL = "AMD EPYC (vendor AuthenticAMD family 25 model 1 stepping 1)"


def _on_kernels(old_kernels, new_kernels) -> tuple[RunResults, RunResults]:
    """The crafted pair on one EPYC host, each engine on the library given."""
    old, new = _runs()
    for run, kernels in ((old, old_kernels), (new, new_kernels)):
        run.run = {**run.run, "cpu": EPYC, "isa": ["avx2", "avx512f", "avx512_bf16"], "engine_kernels": kernels}
    return old, new


def test_runs_on_other_kernel_libraries_are_not_like_for_like():
    diff = diff_runs(*_on_kernels("_C", "_C_AVX2"))
    reason = "engine kernel libraries differ: _C (OLD) vs _C_AVX2 (NEW)"
    assert diff.not_like_for_like == [reason]
    text = format_diff(diff)
    # Right under the identity table, before what broke.
    assert f"  ≠ engine_kernels       {'_C':{len(EPYC_LABEL)}}  _C_AVX2\n" in text
    assert f"    host                 {EPYC_LABEL}  {EPYC_LABEL}\n\nNOT LIKE FOR LIKE: {reason}\n\nNew failures" in text
    assert "    isa                  avx2, avx512f, avx512_bf16" in text
    # Workers of one run that loaded two libraries differ from a run on one of them.
    assert diff_runs(*_on_kernels("_C", ["_C", "_C_AVX2"])).not_like_for_like == [
        "engine kernel libraries differ: _C (OLD) vs _C / _C_AVX2 (NEW)"]


def test_runs_judged_on_other_host_kinds_are_not_like_for_like():
    """One kernel library, but AMX on one host and not the other: the
    answers were held to other noise profiles."""
    old, new = _on_kernels("_C", "_C")
    old.run["engine_host_kind"], new.run["engine_host_kind"] = "cpu:_C", "cpu:_C+amx"
    assert diff_runs(old, new).not_like_for_like == [
        "host kinds differ: cpu:_C (OLD) vs cpu:_C+amx (NEW): their answers were judged by other noise profiles"]
    new.run["engine_host_kind"] = "cpu:_C"
    assert diff_runs(old, new).not_like_for_like == []


def test_runs_on_one_kernel_library_or_an_unknown_one_are_like_for_like():
    text = format_diff(diff_runs(*_on_kernels("_C_AVX2", "_C_AVX2")))
    assert f"    engine_kernels       {'_C_AVX2':{len(EPYC_LABEL)}}  _C_AVX2\n" in text
    assert f"    host                 {EPYC_LABEL}  {EPYC_LABEL}\n\nNew failures" in text  # no warning between
    for kernels in (("_C_AVX2", "_C_AVX2"), ("_C", None), (None, None)):
        assert diff_runs(*_on_kernels(*kernels)).not_like_for_like == [], kernels


def _write(run: RunResults, path: Path) -> Path:
    write_results_atomic(path / "results.json", run.to_json())
    return path


def test_command_line_diff(tmp_path, capsys):
    old, new = _runs()
    old_dir, new_dir = _write(old, tmp_path / "old"), _write(new, tmp_path / "new")
    assert main(["report", "diff", str(old_dir), str(new_dir / "results.json")]) == ExitStatus.FINDINGS
    assert "New failures (2)" in capsys.readouterr().out
    assert main(["report", "diff", str(new_dir), str(new_dir)]) == ExitStatus.OK  # nothing new


def test_command_line_diff_with_a_missing_file_says_so(tmp_path):
    old, _ = _runs()
    old_dir = _write(old, tmp_path / "old")
    done = subprocess.run([sys.executable, "-m", "harness", "report", "diff", str(old_dir),
                           str(tmp_path / "nowhere")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == ExitStatus.USAGE
    assert done.stderr == (f"error: {tmp_path / 'nowhere'}: no such results file "
                           "(give a run directory or its results.json)\n"
                           "mmharness: exit status 4 (usage or set-up error)\n")


def test_baseline_diff_is_rendered_into_the_page(tmp_path):
    old, new = _runs()
    page = render_report(new, tmp_path / "report.html", baseline=old, memory_pct=10).read_text()
    section = page[page.index('<section id="diff"'):page.index("</section>", page.index('<section id="diff"'))]
    for key, count in (("new", 2), ("fixed", 2), ("still", 1), ("memory", 2)):
        assert f'data-diff="{key}" data-count="{count}"' in section
    assert '<td class="mono changed">0.9.1</td><td class="mono changed">0.9.2</td>' in section
    assert "+15.0%" in section


def test_baseline_diff_in_the_page_shows_both_kernel_libraries(tmp_path):
    old, new = _on_kernels("_C", "_C_AVX2")
    page = render_report(new, tmp_path / "report.html", baseline=old).read_text()
    assert '<th>engine_kernels</th><td class="mono changed">_C</td><td class="mono changed">_C_AVX2</td>' in page
    assert f'<th>host</th><td class="mono">{EPYC_LABEL}</td>' in page


def test_command_line_summary_exits_non_zero_when_a_check_failed(tmp_path, capsys):
    _, new = _runs()
    run_dir = _write(new, tmp_path / "run-new")
    assert main(["report", "summary", str(run_dir)]) == 1
    assert capsys.readouterr().out == (
        "mmharness: FAILED: 2 fail, 1 error, 4 pass (7 checks)\n"
        f"mmharness: report: {run_dir / 'report.html'}\n")


def test_a_check_unsupported_where_it_passed_before_is_a_new_failure():
    """A feature the engine served in OLD and says it does not serve in NEW
    went away: report diff counts it, and its status is 1."""
    def rec(verdict):
        return CheckRecord(id="scenarios/test_vision_lora.py::test_lora_served[tp1-tiny]", verdict=verdict,
                           cause="not-supported: Gemma4 does not support LoRA yet." if verdict == "unsupported" else None)
    old, new = RunResults(run={}, records=[rec("pass")]), RunResults(run={}, records=[rec("unsupported")])
    diff = diff_runs(old, new)
    assert [(r.verdict, was) for r, was in diff.new_failures] == [("unsupported", "pass")]
    assert diff_runs(new, new).new_failures == []  # unsupported before and now: nothing new
