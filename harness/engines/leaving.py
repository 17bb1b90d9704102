"""A client that goes away mid-stream, in a process of its own.

It waits until the engine runs the requests it must follow (`running`) and
has ended the ones it must come after (`ended`), sends its request over
HTTP, and closes the connection once the engine has run that request for
`steps` steps, as the engine's own processes wrote them down
(harness.engines.observations).

Why a process of its own, scheduled ahead of the engine where allowed:
harness.engines.punctual.

    python -m harness.engines.leaving < spec.json   # prints `ready`, then the outcome

The spec: {"url": the server's base URL, "api_key", "body": the chat
completion's JSON body, "headers": {...}, "request_id", "steps",
"observations": the engine's observation file (null: not observed, so the
client leaves at once), "offset": where this round's events begin,
"running": [request ids], "ended": [request ids], "timeout_s"}.

The outcome: {"outcome": "left", "e2e_s"} (whether the engine had ended
the request first is the observer's to say), {"outcome": "rejected",
"status", "body"}, or {"outcome": "unreachable", "error"}.
"""
from __future__ import annotations

import http.client
import json
import select
import socket
import time
import urllib.parse
from pathlib import Path

from harness.engines.observations import Observations
from harness.engines.punctual import START_S, Punctual, serve


def leave_in_own_process(spec: dict) -> dict:
    """Run the leaving client `spec` describes in a child process; its outcome."""
    return Punctual("harness.engines.leaving", spec).outcome(spec["timeout_s"] + START_S)


def leave(spec: dict) -> dict:
    observations = Observations(spec["observations"] and Path(spec["observations"]))
    deadline = time.monotonic() + spec["timeout_s"]
    observations.wait_all(spec["running"], spec["offset"], _left(deadline), ended=False)
    observations.wait_all(spec["ended"], spec["offset"], _left(deadline), ended=True)
    offset = observations.mark()
    sent = time.monotonic()
    try:
        request = _Request(spec, timeout_s=_left(deadline))
    except OSError as e:
        return {"outcome": "unreachable", "error": f"{type(e).__name__}: {e}"}
    try:
        observations.wait_steps(spec["request_id"], spec["steps"], offset, _left(deadline),
                                unless=request.answered_otherwise)
    finally:
        request.close()  # the connection goes: the server sees its client leave
    return request.refusal or {"outcome": "left", "e2e_s": time.monotonic() - sent}


class _Request:
    """One streamed chat completion, sent at once, its answer left unread
    unless it begins with a refusal."""

    def __init__(self, spec: dict, timeout_s: float):
        url = urllib.parse.urlsplit(spec["url"])
        self.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s)
        self.refusal: dict | None = None
        self._status_read = False
        self.conn.request("POST", f"{url.path.rstrip('/')}/v1/chat/completions", body=json.dumps(spec["body"]),
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"Bearer {spec['api_key']}", **spec["headers"]})

    def answered_otherwise(self) -> bool:
        """Whether the server's answer has begun, and not with 200: then
        `refusal` holds it."""
        if self._status_read or not select.select([self.conn.sock], [], [], 0)[0]:
            return False
        self._status_read = True
        try:
            response = self.conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            self.refusal = {"outcome": "unreachable", "error": f"{type(e).__name__}: {e}"}
            return True
        if response.status != 200:
            self.refusal = {"outcome": "rejected", "status": response.status,
                            "body": response.read(64_000).decode(errors="replace")}
        return self.refusal is not None

    def close(self) -> None:
        if self.conn.sock is not None:
            try:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.conn.close()


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


if __name__ == "__main__":
    serve(leave)
