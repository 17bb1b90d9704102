"""pip's configured sources, told apart by whether they give upload times.

pip's `--uploaded-prior-to` filters only files whose index says when each
came (an HTTP index speaking PEP 691 JSON, as PyPI does). Files from a
file index or a find-links folder pass any cut-off unchecked (pip skips the
filter for local files), and pip refuses the files of an HTTP index that
gives no time. So a dated resolve sees the configured HTTP indexes only,
with the rest of the configuration (constraints, certificates, timeouts)
as it is.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from harness.index import PYPI_SIMPLE

# The options that say where pip looks; every other option is kept as it is.
SOURCE_OPTIONS = ("index-url", "extra-index-url", "find-links", "no-index")
# The configuration sections that apply to `pip install` and `pip download`.
SECTIONS = ("global", "install", "download", ":env:")


@dataclass(frozen=True)
class PipSources:
    index_url: str = PYPI_SIMPLE
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)  # the other options, by name

    @property
    def timed(self) -> list[str]:
        """The indexes that can give upload times: HTTP ones."""
        return [url for url in (self.index_url, *self.extra_index_urls) if _is_http(url)]

    @property
    def untimed(self) -> list[str]:
        """What gives no upload time: file indexes and find-links."""
        return [url for url in (self.index_url, *self.extra_index_urls) if not _is_http(url)] + list(self.find_links)

    def dated_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a pip that reads no configuration file and no
        source from the environment, with every other option kept."""
        env = {k: v for k, v in (os.environ if base is None else base).items()
               if not (k.startswith("PIP_") and _option(k) in (*SOURCE_OPTIONS, "config-file"))}
        env["PIP_CONFIG_FILE"] = os.devnull
        for name, value in self.options.items():
            env.setdefault("PIP_" + name.upper().replace("-", "_"), value)
        return env

    def dated_args(self, cutoff: str, wheelhouse: str) -> list[str]:
        timed = self.timed
        if not timed:
            raise ValueError(f"no configured index gives upload times (only {', '.join(self.untimed)}): "
                             f"give --as-of now")
        return ["--index-url", timed[0], *(a for url in timed[1:] for a in ("--extra-index-url", url)),
                "--find-links", wheelhouse, "--uploaded-prior-to", cutoff]


def _is_http(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def _option(variable: str) -> str:
    return variable[len("PIP_"):].lower().replace("_", "-")


def configured(env: dict[str, str] | None = None) -> PipSources:
    """What `pip config list` says pip is configured with here (files, then
    the environment over them)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                         env=dict(os.environ if env is None else env), timeout=60)
    return parse_config_list(out.stdout)


def parse_config_list(listing: str) -> PipSources:
    files: dict[str, str] = {}
    environment: dict[str, str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in SECTIONS:
            continue
        (environment if section == ":env:" else files)[name] = value.strip().strip("'\"")
    settings = files | environment
    words = {name: shlex.split(settings.get(name, "")) for name in ("extra-index-url", "find-links")}
    return PipSources(index_url=settings.get("index-url") or PYPI_SIMPLE,
                      extra_index_urls=tuple(words["extra-index-url"]), find_links=tuple(words["find-links"]),
                      options={k: v for k, v in files.items() if k not in SOURCE_OPTIONS})
