"""A package index on 127.0.0.1 that speaks PEP 691 JSON with each file's
upload time, as PyPI does (pip's `--uploaded-prior-to` skips `file://`
indexes), and the small wheels it serves."""
from __future__ import annotations

import base64
import hashlib
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
          modules: dict[str, str] | None = None, tag: str = "py3-none-any") -> Path:
    """A wheel pip installs: its metadata (with `requires`) and `modules`
    (path in the wheel: source)."""
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = dict(modules or {})
    files[f"{info}/METADATA"] = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                                         *(f"Requires-Dist: {r}\n" for r in requires)])
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"
    record = [f"{path},sha256={_digest(body.encode())},{len(body.encode())}" for path, body in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = Path(folder) / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name_in_wheel, body in files.items():
            whl.writestr(name_in_wheel, body)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


class LoopbackIndex:
    """`with LoopbackIndex(root) as index:` serves what `add` gave it at
    `index.url` (a simple index root)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.files: dict[str, list[tuple[Path, str | None]]] = {}
        self.server: ThreadingHTTPServer | None = None

    def add(self, path: Path, upload_time: str | None) -> Path:
        project = canonicalize_name(parse_wheel_filename(path.name)[0])
        self.files.setdefault(project, []).append((Path(path), upload_time))
        return path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/simple"

    def page(self, project: str) -> dict | None:
        if project not in self.files:
            return None
        base = f"http://127.0.0.1:{self.server.server_port}/files"
        return {"meta": {"api-version": "1.1"}, "name": project, "versions": [],
                "files": [{"filename": p.name, "url": f"{base}/{p.name}",
                           "hashes": {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()},
                           **({"upload-time": when} if when else {})} for p, when in self.files[project]]}

    def __enter__(self) -> LoopbackIndex:
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                parts = [p for p in self.path.split("?")[0].split("/") if p]
                if len(parts) == 2 and parts[0] == "simple" and (page := index.page(canonicalize_name(parts[1]))):
                    self._send(json.dumps(page).encode(), JSON_TYPE)
                elif len(parts) == 2 and parts[0] == "files" and any(
                        p.name == parts[1] for files in index.files.values() for p, _ in files):
                    path = next(p for files in index.files.values() for p, _ in files if p.name == parts[1])
                    self._send(path.read_bytes(), "application/octet-stream")
                else:
                    self.send_error(404)

            def _send(self, body: bytes, content_type: str):
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
