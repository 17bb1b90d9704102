"""The HTML report: what it says, that engine output stays text, the memory
chart's axes, and a real headless Chromium that loads it, runs its script
and takes a screenshot."""
from __future__ import annotations

import base64
import dataclasses
import gzip
import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from harness.report.html import render_report
from harness.report.memory_plot import FAILURE_POINTS, HEADROOM, PAGE_POINTS, plot_data
from harness.report.sections import metadata_rows
from harness.results.history import FlakyCount, Streak
from harness.results.merge import merge_run
from harness.results.record import CheckRecord, record_log_tail
from harness.results.run import RunResults
from harness.results.store import RecordWriter, RunLayout
from harness.units import GiB

CHROMIUM = Path("/usr/bin/chromium")
# Untrusted engine output that would mark the page if it ever ran.
PWN = "<script>document.documentElement.setAttribute('data-pwned','script')</script>"
PWN_IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">"
FAILING = "scenarios/test_image_batch.py::test_batch[tiny-llava-<b>4</b>]"
PASSING = "scenarios/test_audio_ragged.py::test_ragged[tiny-whisper]"


def _timeline(peak_gib: float) -> dict:
    """A record's memory_timeline as the engines plugin leaves it: 400
    points, the GPU rising to its peak and falling back a little."""
    gpu = [int(peak_gib * GiB * min(1.0, i / 100) - (0.5 * GiB if i > 250 else 0)) for i in range(400)]
    return {"t": [i / 10 for i in range(400)],
            "series": {"cuda:0": gpu, "engine-rss": [int(2 * GiB + i * 1e6) for i in range(400)]}}


def crafted_run(base: Path, extra_passes: int = 0) -> RunResults:
    """A run with one check of each verdict, written through the store the
    way the plugin writes one: a real log file, memory on the records."""
    layout = RunLayout(base / "run-20260102T020000Z")
    # Where the engines plugin copies a scenario's log slice: in the run.
    logs = layout.run_dir / "logs"
    logs.mkdir(parents=True)
    log = logs / "engine.log"
    log.write_text("".join(f"INFO step {i}\n" for i in range(200)) +
                   f"ERROR engine said {PWN}\nCUDA out of memory. Tried to allocate 2.00 GiB\n")
    records = [
        CheckRecord(id=FAILING, family="image_batch", params={"batch": 4}, model="tiny-llava",
                    engine="offline:vllm", engine_version="0.9.2", verdict="fail", cause="oom",
                    message=f"engine ran out of memory on a batch of 4 {PWN}",
                    divergence={"position": 7, "expected": "a cat", "actual": PWN_IMG},
                    outputs=[PWN, PWN_IMG], memory_budget={"cuda:0": 22 * GiB},
                    memory_timeline=_timeline(21.0), peak_memory={"cuda:0": 21 * GiB},
                    log_path=str(log), log_tail=record_log_tail(log), call_window=[30.1, 31.16],
                    durations={"setup": 0.2, "call": 12.5, "teardown": 0.1}),
        CheckRecord(id=PASSING, family="audio_ragged", model="tiny-whisper", engine="offline:vllm",
                    engine_version="0.9.2", verdict="pass", outputs=PWN,
                    memory_budget={"cuda:0": 22 * GiB},
                    memory_timeline=_timeline(6.0), peak_memory={"cuda:0": 6 * GiB},
                    durations={"setup": 0.1, "call": 3.0, "teardown": 0.1}),
        CheckRecord(id="scenarios/test_video.py::test_frames[tiny]", family="video", verdict="error",
                    cause="harness: KeyError", message="KeyError: 'frames'"),
        CheckRecord(id="scenarios/test_video.py::test_long[tiny]", family="video", verdict="skip",
                    message="needs a GPU"),
        CheckRecord(id="scenarios/test_lora.py::test_swap[tiny]", family="lora", verdict="known issue",
                    cause="mismatch", message="adapter output drifts",
                    known_issue={"link": "https://example.invalid/vllm/issues/9", "reason": "drift"}),
    ]
    records += [CheckRecord(id=f"scenarios/test_more.py::test_more[{i:03d}]", family="more", verdict="pass",
                            durations={"call": 0.5}) for i in range(extra_passes)]
    writer = RecordWriter(layout, "gw0")
    for record in records:
        writer.append(record)
    writer.close()
    return merge_run(layout, {"run_id": layout.run_dir.name, "finished": "2026-01-02T03:00:00+00:00", "engine": "vllm",
                              "engine_version": "0.9.2", "torch": "2.5.1", "tier": "gpu",
                              "started": "2026-01-02T02:00:00+00:00",
                              "gpus": [{"index": 0, "name": "NVIDIA L4", "driver": "550.54",
                                        "memory_bytes": 24 * GiB}]}, incomplete=None)


@pytest.fixture
def report(tmp_path) -> Path:
    results = crafted_run(tmp_path)
    out = results.path.parent / "report.html"
    streaks = {FAILING: Streak("run-20251230T020000Z", "2025-12-30T02:00:00+00:00", 3)}
    return render_report(results, out, streaks=streaks)


def test_engine_output_and_logs_stay_text(report):
    page = report.read_text()
    # Only the page's own four scripts: the error sentinel, the records'
    # JSON, uPlot and the page script.
    assert len(re.findall(r"<script\b", page, re.IGNORECASE)) == 4
    assert "<img src=x" not in page
    details = page[page.index('<section id="details">'):page.index('<script type="application/json"')]
    assert "engine ran out of memory on a batch of 4 &lt;script&gt;" in details   # message
    assert "ERROR engine said &lt;script&gt;" in details                          # log tail
    assert "&lt;img src=x onerror=" in details                                     # divergence
    data = page[page.index('id="mmh-data">'):]
    assert "\\u003cscript\\u003edocument" in data                                  # JSON for the table
    # A row's detail HTML, in the gzipped blob the page's script inserts.
    row_detail = _details(report)[PASSING]["html"]
    assert "&lt;script&gt;document" in row_detail and "<script" not in row_detail


EPYC = {"vendor": "AuthenticAMD", "family": "25", "model": "1", "stepping": "1", "model_name": "AMD EPYC"}


@pytest.mark.parametrize("run, rows", [
    ({"cpu_model": "AMD EPYC", "cpu": EPYC, "isa": ["avx2", "avx512f"], "engine_kernels": "_C_AVX2",
      "engine_kernel_level": "native", "engine_isa": ["avx2", "avx512f"]},
     [("CPU", "AMD EPYC (vendor AuthenticAMD family 25 model 1 stepping 1)"), ("ISA", "avx2, avx512f"),
      ("engine kernels", "_C_AVX2 (level native; engine sees avx2, avx512f)")]),
    # A run before `cpu` keeps its CPU's name; workers that loaded two libraries show both.
    ({"cpu_model": "Xeon", "engine_kernels": ["_C", "_C_AVX2"]},
     [("CPU", "Xeon"), ("engine kernels", "_C / _C_AVX2")]),
    # A name KVM hid, a library not seen, a host with none of the features.
    ({"cpu": dict.fromkeys(EPYC) | {"vendor": "GenuineIntel", "family": "6"}, "isa": [], "engine_kernels": None,
      "engine_kernel_level": "native", "engine_isa": []},
     [("CPU", "vendor GenuineIntel family 6"), ("ISA", "none"), ("engine kernels", "unknown (level native; engine sees none)")]),
])
def test_metadata_shows_the_cpu_its_features_and_the_engines_kernel_library(run, rows):
    assert [row for row in metadata_rows(run) if row[0] != "finished"] == rows


def test_summary_failures_by_cause_and_since(report):
    page = report.read_text()
    counts = dict(re.findall(r'data-verdict="([a-z ]+)" data-count="(\d+)"', page))
    assert counts == {"fail": "1", "error": "1", "flaky": "0", "known issue": "1", "unsupported": "0",
                      "skip": "1", "pass": "1"}
    assert '<div class="banner red">2 check(s) failed.</div>' in page
    causes = re.findall(r'<div class="cause-group" data-cause="([^"]+)"><h3>[^<]+ \((\d+)\)', page)
    assert causes == [("harness", "1"), ("oom", "1"), ("mismatch", "1")]
    assert "failing since run-20251230T020000Z (3 runs)" in page
    assert "NVIDIA L4 · 24 GiB · driver 550.54" in page
    assert "Log tail" in page and "CUDA out of memory" in page
    assert "https://example.invalid/vllm/issues/9" in page


def _page_data(report: Path) -> dict:
    page = report.read_text()
    data = page[page.index('id="mmh-data">') + len('id="mmh-data">'):]
    return json.loads(data[:data.index("</script>")])


def _details(report: Path) -> dict[str, dict]:
    """Each check's entry in the page's gzipped blob, by check id."""
    data = _page_data(report)
    entries = json.loads(gzip.decompress(base64.b64decode(data["details"])))
    return {row["id"]: entry for row, entry in zip(data["records"], entries)}


def test_every_chart_is_the_browsers_with_the_peak_kept(report):
    details = _details(report)
    failing, passing = details[FAILING]["plot"], details[PASSING]["plot"]
    # A failure's chart is read, a pass's glanced at: more points for the first.
    assert PAGE_POINTS < failing["t"]["n"] <= FAILURE_POINTS
    assert passing["t"]["n"] <= PAGE_POINTS
    # The bucket maximum keeps the peak through downsampling.
    assert max(passing["mib"]["cuda:0"]) == 6 * GiB // 2**20
    assert max(failing["mib"]["cuda:0"]) == 21 * GiB // 2**20
    page = report.read_text()
    assert "<svg" not in page and "figure" not in _page_data(report)["records"][0]


def test_chart_axes_fit_the_data_and_mark_the_call():
    """The y axis ends above the peak (a flat line at the peak is not on the
    frame) and above the budget line; the x axis is the timeline's own."""
    flat = {"t": [0.5 + i / 10 for i in range(47)], "series": {"cuda:0": [3 * GiB] * 47}}
    record = CheckRecord(id="c", memory_timeline=flat, call_window=[2.0, 3.06])
    plot = plot_data(record, PAGE_POINTS)
    assert plot["x"] == [0.5, flat["t"][-1]]
    assert plot["y"] == [0, pytest.approx(3 * HEADROOM, abs=1e-3)] and HEADROOM > 1
    assert plot["call"] == [2.0, 3.06]
    budgeted = plot_data(dataclasses.replace(record, memory_budget={"cuda:0": 4 * GiB, "cpu": 9 * GiB}),
                         PAGE_POINTS)
    # A budget above the peak is inside the range; one for a series not drawn is not.
    assert budgeted["y"][1] == pytest.approx(4 * HEADROOM, abs=1e-3)
    assert budgeted["budget_gib"] == {"cuda:0": 4.0}
    # Results from before the field: no window, nothing marked.
    assert "call" not in plot_data(dataclasses.replace(record, call_window=None), PAGE_POINTS)


def test_fuzzing_section_shows_each_search_and_each_failure_with_its_reproducers(tmp_path):
    layout = RunLayout(tmp_path / "run-20260102T020000Z")
    folder = layout.run_dir / "fuzz" / "case-0"
    folder.mkdir(parents=True)
    files = {name: folder / f for name, f in (("workload", "workload.json"), ("repro", "repro.py"),
                                              ("collect_env", "collect_env.txt"))}
    for path in files.values():
        path.write_text("x")
    fuzz = {"seed": 7, "budget_s": 60.0, "shrink_s": 180.0, "examples": 42, "inconclusive": {"alike": 2},
            "shapes": {"2 req · audiox2 · ragged audio": 5, "1 req": 37}, "seconds": 99.0, "search_seconds": 8.5,
            "again": {"http-5xx: 500": 3}, "restarts": 1, "found": [{"cause": "mismatch", "shape": "2 req · audiox2 · ragged audio",
                                      "message": f"input r0: {PWN}", "spec": {"requests": [PWN]}}]}
    writer = RecordWriter(layout, "gw0")
    writer.append(CheckRecord(id="scenarios/test_fuzz_multimodal.py::test_fuzz_batches[tiny]", family="fuzz",
                              verdict="fail", cause="mismatch", message="shrunk",
                              evidence={"fuzz": fuzz, "reproducers": [
                                  {**{k: str(v) for k, v in files.items()}, "replay": "pytest x --fuzz-replay y"}]}))
    writer.close()
    results = merge_run(layout, {"run_id": layout.run_dir.name}, incomplete=None)
    page = render_report(results, results.path.parent / "report.html").read_text()
    section = page[page.index('<section id="fuzzing">'):page.index("</section>", page.index('<section id="fuzzing">'))]
    for says in ("seed 7", "42 examples", "the first failure after 8.5 s", "1 engine restart", "2 inconclusive (alike)",
                 "3 failed again as already found (http-5xx: 500)",
                 "2 shapes tried", "<b>mismatch</b>, shrunk to 2 req · audiox2 · ragged audio",
                 '<a href="fuzz/case-0/repro.py">repro</a>', '<a href="fuzz/case-0/workload.json">workload</a>',
                 "pytest x --fuzz-replay y"):
        assert says in section, says
    assert "<script" not in section and "&lt;script&gt;document" in section


def test_paths_are_links_relative_to_the_report_in_both_details(report):
    page = report.read_text()
    absolute = str(report.parent / "logs" / "engine.log")
    assert absolute not in page and absolute not in json.dumps(_details(report))
    article = page[page.index('<section id="details">'):]
    row_detail = _details(report)[FAILING]["html"]
    for shown in (article, row_detail):
        assert '<div>log</div><div class="mono"><a href="logs/engine.log">logs/engine.log</a></div>' in shown


def test_a_failures_detail_is_rendered_once_for_both_places(report):
    page = report.read_text()
    row = _row_of(report, FAILING)
    article = re.search(rf'<article class="check" id="check-{row}"><h3>[^<]+</h3>(.*?)</article>',
                        page, re.S).group(1)
    assert article == _details(report)[FAILING]["html"]
    assert "shaded: this check&#39;s call, 30.10–31.16 s" in article
    assert "cuda:0: peak 21.00 GiB at 10.0 s, 95% of its 22.0 GiB budget" in article


def _page_copy(report: Path, name: str, old: str, new: str) -> Path:
    """A copy of the report beside it, with `old` (which must be there) replaced once by `new`."""
    text = report.read_text()
    assert old in text, old
    copy = report.with_name(name)
    copy.write_text(text.replace(old, new, 1))
    return copy


def _chromium(profile: Path, *args: str, window: str = "1280,2400",
              timeout: int = 60) -> subprocess.CompletedProcess:
    """Headless Chromium with its profile in the test's own directory."""
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile / 'chromium-profile'}", "--enable-logging=stderr",
         "--v=0", f"--window-size={window}", "--hide-scrollbars", "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=timeout)


def page_problems(dom: str, stderr: str) -> list[str]:
    """Everything that says the page did not load cleanly. The page logs
    nothing on purpose, so any console line is a problem."""
    problems = [line for line in stderr.splitlines() if ":CONSOLE" in line]
    errors = re.search(r'data-js-errors="([^"]*)"', dom)
    if errors:
        problems.append(f"script errors: {errors.group(1)}")
    if 'data-ready="1"' not in dom:
        problems.append("the page script did not finish")
    if re.search(r'<html\b[^>]*\sdata-pwned="', dom):
        problems.append("engine output ran as markup")
    return problems


needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(),
                                    reason=f"{CHROMIUM} is absent (Debian package chromium)")


def _row_of(report: Path, check: str) -> int:
    return next(i for i, r in enumerate(_page_data(report)["records"]) if r["id"] == check)


@needs_chromium
def test_browser_renders_report_without_errors(report, tmp_path):
    # #row-N opens the failing check's detail, which draws its uPlot chart.
    row = _row_of(report, FAILING)
    done = _chromium(tmp_path, "--dump-dom", f"{report.as_uri()}#row-{row}")
    dom = done.stdout
    assert page_problems(dom, done.stderr) == []
    counts = dict(re.findall(r'data-verdict="([a-z ]+)" data-count="(\d+)"', dom))
    assert counts == {"fail": "1", "error": "1", "flaky": "0", "known issue": "1", "unsupported": "0",
                      "skip": "1", "pass": "1"}
    assert "5 of 5 checks" in dom
    # The opened row drew its chart, on the axes the page data computed:
    # uPlot's own scales, read back after drawing.
    plot = _details(report)[FAILING]["plot"]
    detail = dom[dom.index(f'id="row-{row}"'):dom.index('id="f-more"')]
    chart = re.search(r'<div class="chart" data-i="\d+" data-drawn="1" data-x="([^"]+)" data-y="([^"]+)"',
                      detail)
    assert chart, detail[:2000]
    assert [float(v) for v in chart.group(1).split(",")] == pytest.approx(plot["x"])
    assert [float(v) for v in chart.group(2).split(",")] == pytest.approx(plot["y"])
    assert '<div class="uplot' in detail and "<canvas" in detail
    # The same failure's chart under "Failures in detail" draws too. The page
    # draws those lazily, when an IntersectionObserver sees them near the
    # screen, and headless --dump-dom does not wait for its callback (it
    # raced in 1 of 5 runs): without the observer the page draws them all.
    eager = _page_copy(report, "eager.html", "<head>", "<head><script>delete window.IntersectionObserver;</script>")
    eager_dom = _chromium(tmp_path, "--dump-dom", eager.as_uri()).stdout
    article = eager_dom[eager_dom.index(f'id="check-{row}"'):]
    assert '<div class="uplot' in article[:article.index("</article>")]

    screenshot = tmp_path / "report.png"  # stays in tmp_path, for a person to look at
    shot = _chromium(tmp_path, f"--screenshot={screenshot}", report.as_uri())
    assert screenshot.exists(), shot.stderr
    from PIL import Image
    with Image.open(screenshot) as image:
        assert image.size == (1280, 2400)
        # A blank capture has a handful of colours; a report has hundreds.
        assert len(image.convert("RGB").getcolors(maxcolors=100_000) or []) > 200


# Left on <html> after the page opened #row-N: where the row and the
# sticky header ended up.
MEASURE = """<script>
(function () {
  var row = document.querySelector("#checks tr.row[id='" + location.hash.slice(1) + "']");
  var th = document.querySelector("#checks th");
  document.documentElement.setAttribute("data-measured", JSON.stringify({
    scrolled: window.scrollY, rowTop: row.getBoundingClientRect().top,
    headerBottom: th.getBoundingClientRect().bottom}));
})();
</script></body>"""


@needs_chromium
def test_row_opened_by_its_link_is_not_under_the_sticky_header(tmp_path):
    results = crafted_run(tmp_path, extra_passes=80)
    report = render_report(results, results.path.parent / "report.html")
    measured = _page_copy(report, "measured.html", "</body>", MEASURE)
    row = _row_of(report, "scenarios/test_more.py::test_more[040]")
    done = _chromium(tmp_path, "--dump-dom", f"{measured.as_uri()}#row-{row}", window="1280,600")
    assert page_problems(done.stdout, done.stderr) == []
    saw = json.loads(html.unescape(re.search(r'data-measured="([^"]*)"', done.stdout).group(1)))
    assert saw["scrolled"] > 0  # premise: the page scrolled, so the header is stuck on top
    assert saw["rowTop"] >= saw["headerBottom"], saw


@needs_chromium
def test_browser_check_catches_a_broken_page(report, tmp_path):
    """The checks above must be able to fail: a page whose script throws and
    that lets engine output in unescaped."""
    broken = report.with_name("broken.html")
    broken.write_text(report.read_text().replace(
        '<script type="application/json" id="mmh-data">',
        f'{PWN}<script>undefinedFunction();</script><script type="application/json" id="mmh-data">'))
    done = _chromium(tmp_path, "--dump-dom", broken.as_uri())
    problems = page_problems(done.stdout, done.stderr)
    assert any("undefinedFunction is not defined" in p for p in problems)
    assert "engine output ran as markup" in problems


# Drives the page the way a reader does, then leaves what it saw on <html>.
READER = """<script>
(function () {
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#checks tr.row")); }
  function ids() { return rows().map(function (r) { return r.cells[0].title; }); }
  function type(id, value) { var el = document.getElementById(id); el.value = value; el.dispatchEvent(new Event("input")); }
  var saw = {};
  type("f-text", "video"); saw.text = ids(); saw.shown = document.getElementById("f-shown").textContent;
  type("f-text", ""); type("f-verdict", "pass"); saw.verdict = ids();
  type("f-verdict", ""); type("f-family", "lora"); saw.family = ids();
  type("f-family", "");
  var time = document.querySelectorAll("#checks th")[5];
  time.click(); saw.ascending = rows().map(function (r) { return r.cells[5].textContent; });
  time.click(); saw.descending = rows().map(function (r) { return r.cells[5].textContent; });
  rows()[0].click();
  var tries = 0;
  (function waitForDetail() {  // details are inflated asynchronously
    var detail = document.querySelector("#checks tr.detail");
    if (detail && detail.textContent !== "loading…" || ++tries > 100) {
      saw.detail = detail ? detail.textContent : null;
      document.documentElement.setAttribute("data-reader", JSON.stringify(saw));
    } else {
      setTimeout(waitForDetail, 20);
    }
  })();
})();
</script></body>"""


@needs_chromium
def test_table_filters_sorts_and_opens_details_in_the_browser(report, tmp_path):
    driven = report.with_name("driven.html")
    driven.write_text(report.read_text().replace("</body>", READER))
    done = _chromium(tmp_path, "--dump-dom", driven.as_uri())
    assert page_problems(done.stdout, done.stderr) == []
    saw = json.loads(html.unescape(re.search(r'data-reader="([^"]*)"', done.stdout).group(1)))
    assert saw["text"] == ["scenarios/test_video.py::test_frames[tiny]",
                           "scenarios/test_video.py::test_long[tiny]"]
    assert saw["shown"] == "2 of 5 checks"
    assert saw["verdict"] == [PASSING]
    assert saw["family"] == ["scenarios/test_lora.py::test_swap[tiny]"]
    assert saw["ascending"] == ["0.0", "0.0", "0.0", "3.2", "12.8"]
    assert saw["descending"] == ["12.8", "3.2", "0.0", "0.0", "0.0"]
    # The longest check is the failure: its detail shows the message as text.
    assert "engine ran out of memory on a batch of 4 <script>" in saw["detail"]


@needs_chromium
def test_soak_section_draws_each_process_with_its_fit_and_the_timeslices(tmp_path):
    """The memory check's evidence (a leaking api-server, a flat engine core)
    and the latency check's, as the soak checks write them, drawn as SVG
    lines per process with the fit dashed, and the timeslice table; the
    browser renders the page without problems."""
    from harness.checks.soak import check_no_drift, check_no_leak
    from harness.verdicts import CheckFailure
    from tests.test_soak_checks import SETTINGS, crafted

    with pytest.raises(CheckFailure) as leak:
        check_no_leak(crafted(rss=lambda n: 1000.0 + 0.2 * n), SETTINGS)
    latency = check_no_drift(crafted(), SETTINGS)
    layout = RunLayout(tmp_path / "run-20260102T020000Z")
    writer = RecordWriter(layout, "gw0")
    writer.append(CheckRecord(id="scenarios/test_soak.py::test_soak_memory_flat[tiny]", family="soak",
                              verdict="fail", cause="leak", message=leak.value.message, evidence=leak.value.evidence))
    writer.append(CheckRecord(id="scenarios/test_soak.py::test_soak_latency_steady[tiny]", family="soak",
                              verdict="pass", evidence=latency))
    writer.close()
    results = merge_run(layout, {"run_id": layout.run_dir.name}, incomplete=None)
    page_path = render_report(results, results.path.parent / "report.html")
    page = page_path.read_text()
    section = page[page.index('<section id="soak">'):page.index("</section>", page.index('<section id="soak">'))]
    assert section.count("<svg") == 2
    assert "<title>api-server</title>" in section and "<title>api-server: fit</title>" in section
    assert "<title>EngineCore[2]</title>" in section and "<title>ttft_p50</title>" in section
    assert "<td>leak</td><td>+200.00</td>" in section and "<td>flat</td>" in section
    assert section.count('<tr><td class="mono">') == 2 and section.count("<tr><td>") == 4  # processes; timeslices
    assert "tpot_p50 x1.00 (bound x2.0)" in section
    done = _chromium(tmp_path, "--dump-dom", page_path.as_uri())
    assert page_problems(done.stdout, done.stderr) == []
    assert '<section id="soak">' in done.stdout


FLAKY = "scenarios/test_audio_ragged.py::test_ragged[tiny-whisper-clip0]"


def flaky_report(base: Path) -> Path:
    """A run whose one flaky check failed with a mismatch (its message is
    engine output), then passed on fresh engines; the history has seen it
    flaky once before, in three runs."""
    layout = RunLayout(base / "run-20260105T020000Z")
    writer = RecordWriter(layout, "gw0")
    writer.append(CheckRecord(
        id=FLAKY, family="audio_ragged", verdict="flaky", cause="mismatch", message=f"clip0: token 7 differs {PWN}",
        durations={"setup": 30.0, "call": 2.0, "teardown": 0.1, "rerun": 33.0},
        attempts=[{"verdict": "fail", "cause": "mismatch", "message": f"clip0: token 7 differs {PWN}", "seconds": 32.1},
                  {"verdict": "pass", "outcome": "passed: flaky", "seconds": 33.0}]))
    writer.append(CheckRecord(id=PASSING, family="audio_ragged", verdict="pass", durations={"call": 1.0}))
    writer.close()
    results = merge_run(layout, {"run_id": layout.run_dir.name, "finished": "2026-01-05T03:00:00+00:00"},
                        incomplete=None)
    return render_report(results, results.path.parent / "report.html", flaky={FLAKY: FlakyCount(2, 3)})


def test_a_flaky_check_is_shown_with_both_attempts_never_as_green(tmp_path):
    page = flaky_report(tmp_path).read_text()
    assert "Nothing new from the engine" not in page
    assert '<div class="banner flaky">1 check(s) flaky' in page
    section = page[page.index('<section id="flaky">'):page.index("</section>", page.index('<section id="flaky">'))]
    rows = re.findall(r"<tr><td>(\d)</td><td>(.*?)</td><td class=\"mono\">(.*?)</td><td class=\"msg\">(.*?)</td>"
                      r"<td>(.*?)</td><td>(.*?)</td></tr>", section)
    assert [(n, cause, message, outcome, seconds) for n, _, cause, message, outcome, seconds in rows] == [
        ("1", "mismatch", "clip0: token 7 differs &lt;script&gt;document.documentElement.setAttribute("
                          "&#39;data-pwned&#39;,&#39;script&#39;)&lt;/script&gt;", "", "32.1"),
        ("2", "", "", "passed: flaky", "33.0")]
    assert "flaky in 2 of the 3 runs of this tier that ran it" in section
    assert f'<article class="check" id="check-0"><h3>{FLAKY}</h3>' in page  # its detail, attempts and all
    assert '"outcome": "passed: flaky"' in html.unescape(_details(tmp_path / "run-20260105T020000Z" / "report.html")
                                                         [FLAKY]["html"])


@needs_chromium
def test_the_flaky_section_renders_in_the_browser(tmp_path):
    report = flaky_report(tmp_path)
    done = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert page_problems(done.stdout, done.stderr) == []
    counts = dict(re.findall(r'data-verdict="([a-z ]+)" data-count="(\d+)"', done.stdout))
    assert (counts["flaky"], counts["pass"], counts["fail"]) == ("1", "1", "0")
    assert '<section id="flaky">' in done.stdout and "passed: flaky" in done.stdout
