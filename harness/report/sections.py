"""The server-rendered sections of the report page. Every string that came
from a check, the engine or a log goes through `escape`."""
from __future__ import annotations

import json
from collections import defaultdict
from html import escape
from typing import Any

from harness.checks.verdicts import Verdict
from harness.report.diff import RunDiff
from harness.report.format import (ORDER, OUTPUT_CHARS, as_text, clip, css_class, first_line, has_detail,
                                   has_memory_timeline, pretty, since_text, verdict_badge)
from harness.results.history import Streak
from harness.results.record import CheckRecord
from harness.results.run import RunResults
from harness.units import GiB


def summary(results: RunResults, history_problems: list[str]) -> str:
    run, counts = results.run, results.counts
    if results.green:
        banner = '<div class="banner green">Nothing new from the engine.</div>'
    elif results.failures or results.problems:
        banner = (f'<div class="banner red">{len(results.failures)} check(s) failed'
                  f'{", " + str(len(results.problems)) + " record line(s) unreadable" if results.problems else ""}'
                  f'.</div>')
    else:
        banner = ""
    if not results.complete:
        # Whatever else it says, a run cut short cannot vouch for the checks
        # it never reached.
        banner += (f'<div class="banner red incomplete">Incomplete run: '
                   f'{escape(results.incompleteness)}.</div>')
    chips = "".join(
        f'<div class="count {css_class(v.value)}" data-verdict="{escape(v.value)}" data-count="{counts[v.value]}">'
        f'<b>{counts[v.value]}</b>{escape(v.value)}</div>' for v in ORDER)
    warnings = "".join(f'<div class="banner warn">{escape(p)}</div>'
                       for p in [*results.problems, *history_problems])
    return (f'<header><h1>mmharness run {escape(str(run.get("run_id", "")))}</h1>{banner}'
            f'<section id="summary"><div class="counts">{chips}'
            f'<div class="count"><b>{len(results.records)}</b>checks</div></div>{warnings}'
            f'{_metadata(run)}</section></header>')


# Run fields the metadata table shows under its own labels (or not at all).
SHOWN_RUN_FIELDS = {"engine", "engine_version", "torch", "device", "tier", "started", "finished",
                    "command", "harness_git_sha", "harness_git_dirty", "python", "harness_torch",
                    "gpus", "cpu_model", "platform", "run_id", "pytest_exit_status",
                    "complete", "incomplete_reason"}


def _metadata(run: dict[str, Any]) -> str:
    rows = [
        ("engine", " ".join(str(run[k]) for k in ("engine", "engine_version") if run.get(k))),
        ("engine torch", run.get("torch")),
        ("device", run.get("device")),
        ("tier", run.get("tier")),
        ("started", run.get("started")),
        ("finished", run.get("finished") or "did not finish (records merged after the run)"),
        ("command", run.get("command")),
        ("harness git sha", (run.get("harness_git_sha") or "") + (" (uncommitted changes)" if run.get("harness_git_dirty") else "")),
        ("python", run.get("python")),
        ("harness torch", run.get("harness_torch")),
        ("GPUs", _gpus(run.get("gpus") or [])),
        ("CPU", run.get("cpu_model")),
        ("platform", run.get("platform")),
    ]
    # Whatever else the engine fixtures reported, after the usual fields.
    rows += [(key, value) for key, value in run.items() if key not in SHOWN_RUN_FIELDS]
    body = "".join(f"<tr><th>{escape(key)}</th><td class='mono'>{escape(as_text(value))}</td></tr>"
                   for key, value in rows if value not in (None, "", []))
    return f'<table class="meta">{body}</table>'


def _gpus(gpus: list[dict[str, Any]]) -> str:
    return "; ".join(f"{g['name']} · {g['memory_bytes'] / GiB:.0f} GiB · driver {g['driver']}"
                     if "name" in g else str(g.get("error", g)) for g in gpus)


def diff_section(diff: RunDiff, index: dict[str, int]) -> str:
    identity = "".join(
        f"<tr><th>{escape(key)}</th><td class='mono{' changed' if old != new else ''}'>{escape(as_text(old) if old is not None else '-')}</td>"
        f"<td class='mono{' changed' if old != new else ''}'>{escape(as_text(new) if new is not None else '-')}</td></tr>"
        for key, old, new in diff.identity)

    def listing(title: str, key: str, items: list[str]) -> str:
        body = "".join(f"<li>{item}</li>" for item in items) or "<li>none</li>"
        return f'<h3 data-diff="{key}" data-count="{len(items)}">{escape(title)} ({len(items)})</h3><ul>{body}</ul>'

    new = [f"{verdict_badge(r.verdict)} {_link(r, index)} <span class='msg'>{escape(first_line(r.message))}</span> "
           f"(was {escape(was or 'not run')})" for r, was in diff.new_failures]
    fixed = [f"<a href='#row-{index[r.id]}' class='mono'>{escape(r.id)}</a> (was {escape(was)})"
             for r, was in diff.fixed]
    still = [f"{verdict_badge(r.verdict)} {_link(r, index)} <span class='msg'>{escape(first_line(r.message))}</span>"
             for r, _ in diff.still_failing]
    moves = "".join(
        f"<tr><td class='mono'>{escape(m.check)}</td><td>{escape(m.series)}</td>"
        f"<td>{m.old / GiB:.2f} GiB</td><td>{m.new / GiB:.2f} GiB</td><td>{m.percent:+.1f}%</td></tr>"
        for m in diff.memory_moves)
    moves_table = (f"<table><thead><tr><th>check</th><th>series</th><th>baseline</th><th>this run</th>"
                   f"<th>change</th></tr></thead><tbody>{moves}</tbody></table>" if moves else "<p>none</p>")
    return (f'<section id="diff" class="diff"><h2>Against the baseline</h2>'
            f'<table class="meta"><thead><tr><th></th><th>baseline</th><th>this run</th></tr></thead>'
            f'<tbody>{identity}</tbody></table>'
            f'{listing("New failures", "new", new)}{listing("Fixed", "fixed", fixed)}'
            f'{listing("Still failing", "still", still)}'
            f'<h3 data-diff="memory" data-count="{len(diff.memory_moves)}">Memory peaks moved by more than '
            f'{diff.memory_pct:g}% ({len(diff.memory_moves)})</h3>{moves_table}</section>')


def failures_by_cause(records: list[CheckRecord], index: dict[str, int],
                       streaks: dict[str, Streak]) -> str:
    groups: dict[str, list[CheckRecord]] = defaultdict(list)
    for record in records:
        if record.is_failure or record.verdict == Verdict.KNOWN_ISSUE.value:
            groups[(record.cause or "unknown").split(":", 1)[0].strip()].append(record)
    if not groups:
        return '<section id="failures"><h2>Failures by cause</h2><p>None.</p></section>'
    parts = ['<section id="failures"><h2>Failures by cause</h2>']
    # Causes with new failures first, known issues last.
    for cause, members in sorted(groups.items(), key=lambda g: (-sum(r.is_failure for r in g[1]), g[0])):
        items = "".join(
            f'<li>{verdict_badge(r.verdict)} {_link(r, index)} '
            f'<span class="msg">{escape(first_line(r.message))}</span> '
            f'<span class="since">{escape(since_text(streaks.get(r.id)))}</span></li>' for r in members)
        parts.append(f'<div class="cause-group" data-cause="{escape(cause)}"><h3>{escape(cause)} '
                     f'({len(members)})</h3><ul>{items}</ul></div>')
    parts.append("</section>")
    return "".join(parts)


def appears_fixed(records: list[CheckRecord], index: dict[str, int]) -> str:
    fixed = [r for r in records if r.known_issue_fixed]
    if not fixed:
        return ""
    items = "".join(f'<li><a href="#row-{index[r.id]}" class="mono">{escape(r.id)}</a>: '
                    f'{escape(r.known_issue_fixed.get("reason", ""))} '
                    f'(<a href="{escape(r.known_issue_fixed.get("link", ""))}">{escape(r.known_issue_fixed.get("link", ""))}</a>)</li>'
                    for r in fixed)
    return (f'<section id="appears-fixed"><h2>Known issues that appear fixed ({len(fixed)})</h2>'
            f'<p>These checks match a known-issues entry but passed: retire the entry once confirmed.</p>'
            f'<ul>{items}</ul></section>')


def encoder_chunks(records: list[CheckRecord], index: dict[str, int]) -> str:
    """What each check's encoder made of its memory: "free X, total Y ->
    chunks of k for n items", one line per chunk decision the engine made."""
    shown = [r for r in records if r.evidence.get("encoder_chunks")]
    if not shown:
        return ""
    items = "".join(f'<li><a href="#row-{index[r.id]}" class="mono">{escape(r.id)}</a><ul>'
                    + "".join(f'<li class="mono">{escape(line)}</li>' for line in r.evidence["encoder_chunks"])
                    + "</ul></li>" for r in shown)
    return (f'<section id="encoder-chunks"><h2>Encoder chunks</h2><p>Per check, each chunk decision '
            f'the engine made: its memory query\'s answer, and the passes it made through the vision '
            f'tower.</p><ul>{items}</ul></section>')


def table(records: list[CheckRecord]) -> str:
    """The filter controls and an empty table: the page's script fills it
    from the records' JSON, one page of rows at a time."""
    verdicts = "".join(f'<option value="{escape(v.value)}">{escape(v.value)}</option>' for v in ORDER)
    families = "".join(f"<option>{escape(f)}</option>" for f in sorted({r.family for r in records}))
    return (f'<section id="table"><h2>Checks</h2><div class="filters">'
            f'<input id="f-text" type="search" placeholder="filter: check id, cause, message, model">'
            f'<select id="f-verdict"><option value="">all verdicts</option>{verdicts}</select>'
            f'<select id="f-family"><option value="">all families</option>{families}</select>'
            f'<span id="f-shown"></span><span class="msg">Click a header to sort, a row for its detail.</span></div>'
            f'<table id="checks"><colgroup><col style="width:34%"><col style="width:11%">'
            f'<col style="width:8%"><col style="width:11%"><col style="width:11%"><col style="width:6%">'
            f'<col style="width:9%"><col style="width:10%"></colgroup><thead><tr>'
            f'<th>check</th><th>family</th><th>verdict</th><th>cause</th>'
            f'<th>model</th><th>time (s)</th><th>peak memory</th><th>failing since</th></tr></thead>'
            f'<tbody></tbody></table><button id="f-more" hidden>show more</button></section>')


def failure_details(records: list[CheckRecord], index: dict[str, int],
                     streaks: dict[str, Streak], figures: dict[str, str], missing: dict[str, str]) -> str:
    articles = [_article(r, index[r.id], streaks.get(r.id), r.id in figures, missing.get(r.id))
                for r in records if has_detail(r)]
    if not articles:
        return ""
    return f'<section id="details"><h2>Failures in detail</h2>{"".join(articles)}</section>'


def _article(r: CheckRecord, i: int, streak: Streak | None, has_figure: bool,
             missing_figure: str | None) -> str:
    facts = [("verdict", None), ("cause", r.cause), ("since", since_text(streak)),
             ("engine", " ".join(filter(None, [r.engine, r.engine_version]))), ("model", r.model),
             ("parameters", json.dumps(r.params, ensure_ascii=False) if r.params else ""),
             ("durations (s)", json.dumps(r.durations) if r.durations else ""),
             ("peak memory", ", ".join(f"{k} {v / GiB:.2f} GiB" for k, v in r.peak_memory.items())),
             ("log", r.log_path), ("timeline", r.timeline_path)]
    kv = "".join(f"<div>{escape(k)}</div><div class='mono'>{verdict_badge(r.verdict) if k == 'verdict' else escape(str(v))}</div>"
                 for k, v in facts if k == "verdict" or v)
    parts = [f'<article class="check" id="check-{i}"><h3>{escape(r.id)}</h3><div class="kv">{kv}</div>']
    if r.known_issue:
        link = r.known_issue.get("link")
        parts.append(f'<p>Known issue: {escape(r.known_issue.get("reason", ""))}'
                     + (f' (<a href="{escape(link)}">{escape(link)}</a>)' if link else "") + "</p>")
    parts.append(f"<h4>Message</h4><pre>{escape(r.message or '(none)')}</pre>")
    if r.divergence is not None:
        parts.append(f"<h4>First divergence</h4><pre>{escape(pretty(r.divergence))}</pre>")
    if r.outputs is not None:
        parts.append(f"<h4>Engine output</h4><pre>{escape(clip(pretty(r.outputs), OUTPUT_CHARS[True]))}</pre>")
    if r.evidence:
        parts.append(f"<h4>Evidence</h4><pre>{escape(pretty(r.evidence))}</pre>")
    if r.log_tail:
        # The box opens scrolled to the end of the log, where the error is.
        parts.append(f'<h4>Log tail</h4><div class="tail"><pre>{escape(r.log_tail)}</pre></div>')
    if has_figure:
        # The page's script turns the figure into an image as it scrolls
        # into view: decoding every figure up front would cost more than
        # the rest of the page.
        parts.append(f'<h4>Memory</h4><div class="plot" data-figure="{i}"></div>')
    elif missing_figure:
        parts.append(f'<h4>Memory</h4><p class="msg">{escape(missing_figure)}</p>')
    elif has_memory_timeline(r):
        parts.append(f'<h4>Memory (downsampled)</h4><div class="chart" data-i="{i}"></div>')
    parts.append("</article>")
    return "".join(parts)


def _link(record: CheckRecord, index: dict[str, int]) -> str:
    return f'<a href="#check-{index[record.id]}" class="mono">{escape(record.id)}</a>'
