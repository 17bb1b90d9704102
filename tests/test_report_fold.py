"""Failures by cause folds the failures that say one thing: one entry with
the count, the checks as a list that opens, and one message; known issues
of one finding fold the same way. Checked on the function and in a real
headless Chromium."""
from __future__ import annotations

import html
import json
import re

from harness.report.fold import fold, normalized
from harness.report.html import render_report
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from tests.test_report_html import _chromium, needs_chromium, page_problems

CELL = "scenarios/test_cache_matrix.py::test_cell[tiny-qwen-{}]"
CONFORMER = "scenarios/test_ragged_audio.py::test_edge_input[tiny-gemma4-conformer-{}]"
FINDING = {"link": "docs/findings/002-gemma4-audio-conformer-cpu-stride.md", "reason": "one clip kills the engine"}
LABELS = ["3-image@tower (reloaded)", "prefix", "1-image", "clip0", "2-video@lm", "x"]


def cell_failures() -> list[CheckRecord]:
    """Six cache-matrix cells that fail alike: input, position and tokens apart."""
    return [CheckRecord(id=CELL.format(i), family="cache_matrix", verdict="fail", cause="mismatch",
                        message=f"input {label}: diverged at position {7 + i}: engine token {100 + i}, "
                                f"reference token {2000 - i} (logprob -{i}.25)\nsecond line {i}")
            for i, label in enumerate(LABELS)]


def crafted_records() -> list[CheckRecord]:
    return cell_failures() + [
        # The same words for another cause, and the same cause in other words: not folded.
        CheckRecord(id=CELL.format("premise"), family="cache_matrix", verdict="fail", cause="premise",
                    message="input clip1: diverged at position 3: engine token 5, reference token 6 (logprob -1.25)"),
        CheckRecord(id=CELL.format("lengths"), family="cache_matrix", verdict="fail", cause="mismatch",
                    message="input clip1: lengths differ: engine 12 tokens, reference 14"),
    ] + [CheckRecord(id=CONFORMER.format(i), family="ragged_audio", verdict="known issue",
                     cause="python-exception", known_issue=FINDING,
                     message=f"input clip{i}: no answer: RuntimeError: mat1must be contiguous at last dimension"
                             + (" (the engine was dead)" if i % 2 else ""))
         for i in range(24)]


def test_normalized_drops_the_input_positions_tokens_and_numbers():
    one, two = (normalized(r.message) for r in cell_failures()[:2])
    assert one == two == ("input …: diverged at position N: engine token N, reference token N (logprob -N)")
    assert normalized("positions [3, 17, 40] of 64") == normalized("positions [5] of 32") == "positions […] of N"
    # Digits inside a word are its name, not a number.
    assert normalized("tiny-gemma4 at 0x7f3a") == "tiny-gemma4 at N"
    # A version names the engine; a full stop ends the sentence.
    assert normalized("vllm 0.32.0 said 1.") == "vllm 0.32.0 said N."


def test_fold_keeps_apart_what_differs_in_verdict_cause_or_message():
    folds = fold(crafted_records())
    sizes = sorted((f.cause, len(f.records)) for f in folds)
    assert sizes == [("mismatch", 1), ("mismatch", 6), ("premise", 1), ("python-exception", 24)]
    cells = next(f for f in folds if len(f.records) == 6)
    assert [r.id for r in cells.records] == [CELL.format(i) for i in range(6)]
    assert cells.message == cell_failures()[0].message.splitlines()[0]
    # A known issue folds with the other checks of its finding, whatever its message says.
    known = next(f for f in folds if f.verdict == "known issue")
    assert known.link == FINDING["link"]
    # A failure never folds with a known issue, even in the same words.
    issue = CheckRecord(id="a", verdict="known issue", cause="mismatch", message=cell_failures()[0].message,
                        known_issue={"link": "x"})
    assert len(fold([cell_failures()[0], issue])) == 2


def fold_report(tmp_path):
    results = RunResults(run={"run_id": "run-20260106T020000Z", "finished": "2026-01-06T03:00:00+00:00"},
                         records=crafted_records(), path=tmp_path / "results.json")
    return render_report(results, tmp_path / "report.html")


# Opens each folded entry's list as a reader does, and leaves on <html>
# what each fold showed before and after.
OPENER = """<script>
(function () {
  function shown(el) { return Array.prototype.filter.call(el.querySelectorAll("li a"),
                                                          function (a) { return a.checkVisibility(); }).length; }
  var saw = Array.prototype.map.call(document.querySelectorAll("#failures .fold"), function (f) {
    var closed = shown(f);
    f.querySelector("summary").click();
    return {cause: f.closest(".cause-group").getAttribute("data-cause"), count: f.getAttribute("data-count"),
            summary: f.querySelector("summary").textContent.replace(/\\s+/g, " ").trim(),
            closed: closed, opened: shown(f), open: f.querySelector("details").open,
            checks: Array.prototype.map.call(f.querySelectorAll("li a"), function (a) { return a.textContent; })};
  });
  var single = Array.prototype.map.call(document.querySelectorAll("#failures .cause-group > ul > li:not(.fold)"),
                                        function (li) { return li.querySelector("a").textContent; });
  document.documentElement.setAttribute("data-folds", JSON.stringify({folds: saw, single: single}));
})();
</script></body>"""


@needs_chromium
def test_failures_that_say_one_thing_fold_into_one_entry_that_opens_in_the_browser(tmp_path):
    report = fold_report(tmp_path)
    driven = report.with_name("driven.html")
    driven.write_text(report.read_text().replace("</body>", OPENER))
    done = _chromium(tmp_path, "--dump-dom", driven.as_uri())
    assert page_problems(done.stdout, done.stderr) == []
    match = re.search(r'data-folds="([^"]*)"', done.stdout)
    assert match, "the page has no folded entry"
    saw = json.loads(html.unescape(match.group(1)))
    cells, known = saw["folds"]
    assert (cells["cause"], cells["count"], cells["closed"], cells["opened"], cells["open"]) == (
        "mismatch", "6", 0, 6, True)
    assert cells["checks"] == [CELL.format(i) for i in range(6)]
    # One message, the first check's, once.
    assert cells["summary"] == ("fail 6 checks: input 3-image@tower (reloaded): diverged at position 7: "
                                "engine token 100, reference token 2000 (logprob -0.25)")
    section = done.stdout[done.stdout.index('<section id="failures">'):]
    section = section[:section.index("</section>")]
    assert "diverged at position 8:" not in section
    assert (known["cause"], known["count"], known["closed"], known["opened"]) == ("python-exception", "24", 0, 24)
    assert known["summary"].startswith("known issue 24 checks: input clip0: no answer: RuntimeError: mat1must")
    assert FINDING["link"] in known["summary"]
    # Another cause, or the same cause in other words: an entry of its own.
    assert sorted(saw["single"]) == [CELL.format("lengths"), CELL.format("premise")]
    # The group's heading still counts every check under it.
    causes = re.findall(r'<div class="cause-group" data-cause="([^"]+)"><h3>[^<]+ \((\d+)\)', done.stdout)
    assert causes == [("mismatch", "7"), ("premise", "1"), ("python-exception", "24")]
