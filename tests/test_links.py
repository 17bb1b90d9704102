"""Every relative Markdown link of README.md and docs/ leads somewhere in
the repository: the file exists, and an anchor into a Markdown page names
one of its headings (as GitHub makes anchors of them)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.doc_pages import FENCE, ROOT, pages

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but
    hyphens dropped, spaces as hyphens; a repeat gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def broken_links(page: Path, text: str) -> list[str]:
    broken = []
    for match in LINK.finditer(FENCE.sub("", text)):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("//"):
            continue  # another site: not this test's to reach
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists() or ROOT not in [where, *where.parents]:
            broken.append(f"{target}: no such file in the repository")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{target}: no heading #{anchor}")
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page, page.read_text(encoding="utf-8")) == []


def test_the_docs_have_links_to_check():
    assert sum(len(LINK.findall(p.read_text(encoding="utf-8"))) for p in pages()) > 10


def test_a_broken_link_is_found():
    page = ROOT / "docs" / "releases.md"
    text = ("See [the soak](families/soak.md), [gone](families/no-such-family.md),\n"
            "[a heading](measurements.md#no-such-heading), [ok](measurements.md#hosts-and-commits-x),\n"
            "[upstream](https://github.com/vllm-project/vllm) and [here](#bisects-run-here).\n")
    assert broken_links(page, text) == ["families/no-such-family.md: no such file in the repository",
                                        "measurements.md#no-such-heading: no heading #no-such-heading",
                                        "measurements.md#hosts-and-commits-x: no heading #hosts-and-commits-x"]
