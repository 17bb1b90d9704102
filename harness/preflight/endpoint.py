"""`--engine-url`: a server answers there, and serves the models the
selected checks run on."""
from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request

from harness.models import ModelEntry

# Connection refused answers at once; a black-holed address is waited for this long.
ANSWER_TIMEOUT_S = 5.0
API_KEY_ENV = "MMHARNESS_ENGINE_API_KEY"
# A tiny build's directory: <arch>-<recipe hash> (fixtures/tiny_models/cache.py).
_TINY_DIR = r"{arch}-[0-9a-f]{{20}}"


def served_models(url: str, timeout: float = ANSWER_TIMEOUT_S) -> list[dict] | None:
    """The server's /v1/models entries ({"id", "root"?}), or None where the
    server has no such route but answers /health. Raises OSError (URLError,
    HTTPError) when nothing usable answers."""
    base = url.rstrip("/").removesuffix("/v1")
    key = os.environ.get(API_KEY_ENV, "EMPTY")
    request = urllib.request.Request(f"{base}/v1/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return list(json.load(r).get("data", []))
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
    with urllib.request.urlopen(f"{base}/health", timeout=timeout):
        return None


def serves(models: list[dict], entry: ModelEntry) -> bool:
    """The server serves the entry: a model's id or root is the entry's name
    or model id, or (a tiny build) a build directory of its arch."""
    names = {entry.name, entry.model}
    for m in models:
        for value in (m.get("id"), m.get("root")):
            if not isinstance(value, str):
                continue
            if value in names or (entry.tiny_arch and re.fullmatch(
                    _TINY_DIR.format(arch=re.escape(entry.tiny_arch)), value.rstrip("/").rsplit("/", 1)[-1])):
                return True
    return False


def endpoint_problems(url: str, entries: tuple[ModelEntry, ...], timeout: float = ANSWER_TIMEOUT_S) -> list[str]:
    try:
        models = served_models(url, timeout)
    except urllib.error.HTTPError as e:
        hint = f"; give its key in {API_KEY_ENV}" if e.code in (401, 403) else ""
        return [f"--engine-url {url}: the server answered HTTP {e.code} to {e.filename}{hint}"]
    except (OSError, ValueError) as e:  # refused, timed out, no such host, not JSON
        reason = getattr(e, "reason", e)
        return [f"--engine-url {url}: no server answers there ({reason}); start it first, or fix the URL"]
    if models is None:
        return []  # it answers /health but cannot say what it serves
    missing = [e.name for e in entries if not serves(models, e)]
    if not missing:
        return []
    said = ", ".join(f"{m.get('id')}" + (f" ({m['root']})" if m.get("root") not in (None, m.get("id")) else "")
                     for m in models) or "no model"
    return [f"--engine-url {url} serves {said}, not {', '.join(missing)}, which the selection runs on: "
            f"pick the matrix entry it serves with --model NAME"]
