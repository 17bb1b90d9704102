"""A bisect's own report: the answer at the top, then one row per version
probed (its label, each run's verdict and cause, the engine it reported, the
day its venv was resolved as of and the libraries it holds, the time it
took) linking each run's report. Written as bisect.html and bisect.json
beside the steps."""
from __future__ import annotations

import json
import os
from html import escape
from pathlib import Path

from harness.bisect.search import Answer, Step
from harness.engines.asof import AsOf
from packaging.version import Version


def answer_dict(answer: Answer, question: dict) -> dict:
    return {"question": question, "answer": answer.sentence, "direction": answer.direction,
            "first": answer.first, "last": answer.last, "skipped": answer.skipped,
            "bad_cause": answer.bad_cause, "broken_ends": answer.broken_ends, "advice": answer.advice,
            "note": answer.note,
            "steps": [{"version": s.version, "label": s.label, "runs": [r.to_dict() for r in s.runs]}
                      for s in _by_version(answer.steps)]}


def _by_version(steps: list[Step]) -> list[Step]:
    last = {s.version: s for s in steps}  # a version judged twice (resumed) once
    return sorted(last.values(), key=lambda s: Version(s.version))


def _run_cell(run: dict, folder: Path) -> str:
    said = escape(run["status"] + (f" ({run['cause']})" if run.get("cause") else ""))
    run_dir = run.get("extra", {}).get("run_dir")
    if run_dir and (Path(run_dir) / "report.html").is_file():
        href = os.path.relpath(Path(run_dir) / "report.html", folder)
        said = f'<a href="{escape(href)}">{said}</a>'
    detail = run.get("detail") or ""
    return said + (f'<div class="detail">{escape(detail[:400])}</div>' if detail and run["status"] != "pass" else "")


def render(answer: Answer, question: dict, folder: Path) -> Path:
    data = answer_dict(answer, question)
    (folder / "bisect.json").write_text(json.dumps(data, indent=1))
    rows = []
    for step in data["steps"]:
        first = step["runs"][0]
        extra = first.get("extra", {})
        engine = " ".join(filter(None, [extra.get("engine"), extra.get("engine_version")]))
        day = AsOf.from_dict(extra["as_of"]).said if extra.get("as_of") else ""
        libraries = ", ".join(f"{k} {v}" for k, v in (extra.get("libraries") or {}).items())
        unchecked = "".join(f'<div class="detail">unchecked: {escape(line)}</div>' for line in extra.get("unchecked", []))
        took = sum(r.get("extra", {}).get("duration_s") or 0 for r in step["runs"])
        marks = {answer.first: " first", answer.last: " last"}.get(step["version"], "")
        rows.append(f'<tr class="{escape(step["label"])}{marks}"><td>{escape(step["version"])}</td>'
                    f'<td>{escape(step["label"])}</td>'
                    f'<td>{"<br>".join(_run_cell(r, folder) for r in step["runs"])}</td>'
                    f'<td>{escape(engine)}</td><td>{escape(day)}<div class="detail">{escape(libraries)}</div>'
                    f'{unchecked}</td><td>{took:.0f} s</td></tr>')
    q = question
    html = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>bisect: {escape(q['check'])}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; }}
h1 {{ font-size: 1.3em; }} .answer {{ font-size: 1.2em; font-weight: bold; margin: 1em 0; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; }}
tr.good td:nth-child(2) {{ color: #176617; }} tr.bad td:nth-child(2) {{ color: #a31515; }}
tr.first, tr.last {{ background: #fff6d5; }} .detail {{ color: #555; font-size: 0.85em; white-space: pre-wrap; }}
</style></head><body>
<h1>Bisect of <code>{escape(q['check'])}</code></h1>
<p>{escape(q['dist'])}: good {escape(q['good'])}, bad {escape(q['bad'])}; tier {escape(q['tier'])}{
    f"; -k {escape(q['keyword'])}" if q.get('keyword') else ''}; venvs as of {escape(q.get('as_of') or 'release')}{
    f"; with {escape(' '.join(q['with']))}" if q.get('with') else ''}</p>
<p class="answer" id="answer">{escape(answer.sentence)}</p>
<table><thead><tr><th>version</th><th>judged</th><th>runs (verdict, cause; each links its report)</th>
<th>engine</th><th>venv as of, libraries</th><th>time</th></tr></thead><tbody>
{chr(10).join(rows)}
</tbody></table></body></html>
"""
    out = folder / "bisect.html"
    out.write_text(html)
    return out
