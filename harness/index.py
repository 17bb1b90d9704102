"""A package index's page for one project, read as pip reads it: PEP 691
JSON where the index speaks it, with each file's upload time (PEP 700: what
pip's `--uploaded-prior-to` filters on), else PEP 503 HTML, which names the
files and gives no time.
"""
from __future__ import annotations

import datetime as dt
import json
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

PYPI_SIMPLE = "https://pypi.org/simple"
TIMEOUT_S = 60
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
# JSON first; HTML for indexes that speak nothing else (file indexes, plain folders).
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


class IndexUnreadable(ValueError):
    """An index page that cannot be read."""


@dataclass(frozen=True)
class IndexFile:
    filename: str
    upload_time: dt.datetime | None = None  # None: the index gives none


class _Links(HTMLParser):
    """The links of an index page: file names, or (`keep_folders`) the
    folders a root page lists."""

    def __init__(self, keep_folders: bool = False):
        super().__init__()
        self.keep_folders = keep_folders
        self.files: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        href = urllib.parse.unquote((dict(attrs).get("href") or "").split("#", 1)[0])
        if self.keep_folders:
            if href.endswith("/") and "/" not in href.rstrip("/") and href not in ("../", "./"):
                self.files.append(href.rstrip("/"))
        else:
            self.files.append(href.rsplit("/", 1)[-1])


def parse_time(text: str) -> dt.datetime:
    """An upload time as indexes write it ("2026-08-11T11:17:03.344943Z",
    "2026-10-29T08:34:26Z"), in UTC."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def project_files(dist: str, index_url: str = PYPI_SIMPLE) -> list[IndexFile]:
    """The files an index lists for `dist` (http(s) or file URL), with their
    upload times where it gives them."""
    url = f"{index_url.rstrip('/')}/{canonicalize_name(dist)}/"
    body, content_type = _read(url, "the index page")
    if content_type.startswith(JSON_TYPE):
        try:
            files = json.loads(body)["files"]
            return [IndexFile(f["filename"], parse_time(f["upload-time"]) if f.get("upload-time") else None)
                    for f in files]
        except (ValueError, KeyError, TypeError) as e:
            raise IndexUnreadable(f"the index page {url} is not PEP 691 JSON: {e}") from None
    return [IndexFile(name) for name in links(body)]


def links(html: str, *, folders: bool = False) -> list[str]:
    parser = _Links(keep_folders=folders)
    parser.feed(html)
    return parser.files


def read_html(url: str, what: str) -> str:
    return _read(url, what)[0]


def _read(url: str, what: str) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as page:
            return page.read().decode("utf-8", "replace"), page.headers.get("Content-Type") or ""
    except OSError as e:
        raise IndexUnreadable(f"cannot read {what} {url}: {e}") from None


def version_of_file(dist: str, filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except Exception:
        return None
    return version if canonicalize_name(name) == canonicalize_name(dist) else None
