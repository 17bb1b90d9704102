"""OpenAIEngine.chat_abandoning against a stand-in server on 127.0.0.1 that
writes the in-engine observer's events as an engine would: the staying
requests are sent first and not streamed; each leaving request is sent
once the engine runs every staying one and has ended the leaver before
it; its client goes away once the engine has run it for the steps asked,
which the server sees as the connection closing."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psutil
import pytest

from harness.verdicts import Cause
from harness.engines.base import Sampling
from harness.engines.observations import Observations
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.outcomes import ABANDONED, Completion, EngineCrashed, Rejected

STEP_S = 0.01
STAY_STEPS = 30  # a staying answer's length, one step each


class Recorder:
    """The stand-in engine: arrivals and ends in order, events to the file."""

    def __init__(self, path):
        self.path, self.lock, self.order = path, threading.Lock(), []

    def emit(self, event: str, **fields) -> None:
        with self.lock, open(self.path, "a") as f:
            f.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")

    def note(self, what: str, rid: str) -> None:
        with self.lock:
            self.order.append((what, rid))


def handler(rec: Recorder):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            rid = self.headers["X-Request-Id"]
            engine_id = f"chatcmpl-{rid}-0a1b"
            if body["messages"][0]["content"] == "refuse me":
                rec.note("refused", rid)
                self._json(400, {"error": {"message": "too long for this model", "code": 400}})
                return
            rec.note("leaver arrived" if body.get("stream") else "stayer arrived", rid)
            if body.get("stream"):
                self._stream(engine_id, rid)
            else:
                self._answer(engine_id, rid)

        def _answer(self, engine_id, rid):
            for _ in range(STAY_STEPS):
                rec.emit("step", tokens={engine_id: 1})
                time.sleep(STEP_S)
            rec.emit("finished", requests=[engine_id])
            rec.note("finished", rid)
            self._json(200, {"id": engine_id, "object": "chat.completion", "created": 0, "model": "m",
                             "choices": [{"index": 0, "finish_reason": "length",
                                          "message": {"role": "assistant", "content": "ok"}}]})

        def _json(self, status, answer):
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, engine_id, rid):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            for _ in range(2000):  # far longer than any client stays
                rec.emit("step", tokens={engine_id: 1})
                chunk = {"id": engine_id, "object": "chat.completion.chunk", "created": 0, "model": "m",
                         "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]}
                try:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                except OSError:  # the client went away: abort, as vLLM's server does
                    rec.emit("aborted", requests=[engine_id], held_blocks={engine_id: 1})
                    rec.note("aborted", rid)
                    return
                time.sleep(STEP_S)
            rec.emit("finished", requests=[engine_id])
            rec.note("finished", rid)

    return Handler


class StandInEngine(OpenAIEngine):
    def __init__(self, base_url: str, observations: Observations):
        super().__init__("stand-in", None, request_timeout=20.0)
        self.base_url, self.served_model, self.observations = base_url, "m", observations

    def _death(self):
        return None


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "observe.jsonl"
    path.touch()
    rec = Recorder(path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(rec))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield StandInEngine(f"http://127.0.0.1:{server.server_address[1]}", Observations(path)), rec
    server.shutdown()
    server.server_close()


def test_leavers_go_after_the_stayers_run_one_at_a_time_and_abort(served):
    engine, rec = served
    conversations = [[{"role": "user", "content": str(i)}] for i in range(4)]
    results = engine.chat_abandoning(conversations, Sampling(max_tokens=8), [2, None, 2, None],
                                     leaving=Sampling(max_tokens=4000))
    assert [r.finish_reason for r in results] == [ABANDONED, "length", ABANDONED, "length"]
    assert all(isinstance(r, Completion) for r in results)
    kinds = [what for what, _ in rec.order if what.endswith("arrived")]
    assert kinds == ["stayer arrived"] * 2 + ["leaver arrived"] * 2, rec.order
    events = {(what, rid): i for i, (what, rid) in enumerate(rec.order)}
    first, second = [rid for what, rid in rec.order if what == "leaver arrived"]
    # Both leavers aborted: their clients left long before their 2,000 steps.
    assert ("aborted", first) in events and ("aborted", second) in events, rec.order
    # The second leaver was sent only once the first had ended.
    assert events[("leaver arrived", second)] > events[("aborted", first)], rec.order


def test_a_leaving_request_the_server_refuses_is_rejected_with_its_words(served):
    engine, rec = served
    results = engine.chat_abandoning([[{"role": "user", "content": "refuse me"}]], Sampling(max_tokens=8), [2])
    [r] = results
    assert isinstance(r, Rejected) and r.status == 400 and "too long for this model" in r.message, r
    assert [what for what, _ in rec.order] == ["refused"], rec.order


def test_a_leaving_request_to_a_server_gone_is_the_engine_dead(tmp_path):
    path = tmp_path / "observe.jsonl"
    path.touch()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = StandInEngine(f"http://127.0.0.1:{port}", Observations(path))
    [r] = engine.chat_abandoning([[{"role": "user", "content": "x"}]], Sampling(max_tokens=8), [2])
    assert isinstance(r, EngineCrashed) and r.cause == Cause.ENGINE_DEAD and "connection failed" in r.detail, r


def test_a_leaving_client_goes_with_a_harness_killed_outright(tmp_path):
    """Its own session keeps it out of the harness's process group; the
    parent-death signal still takes it when the harness is SIGKILLed."""
    path = tmp_path / "observe.jsonl"
    path.touch()
    spec = {"url": "http://127.0.0.1:9", "api_key": "k", "headers": {}, "body": {}, "request_id": "mmh-a",
            "steps": 2, "observations": str(path), "offset": 0, "running": ["mmh-never-runs"], "ended": [],
            "timeout_s": 120}
    harness = subprocess.Popen([sys.executable, "-c", "import json, sys\n"
                                "from harness.engines.leaving import leave_in_own_process\n"
                                "leave_in_own_process(json.loads(sys.argv[1]))", json.dumps(spec)])
    try:
        deadline = time.monotonic() + 30
        while not (kids := psutil.Process(harness.pid).children()) and time.monotonic() < deadline:
            time.sleep(0.05)
        [client] = kids
        time.sleep(1.0)  # past its start-up, waiting for a request that never runs
        assert client.is_running() and "harness.engines.leaving" in " ".join(client.cmdline())
    finally:
        harness.kill()
        harness.wait()
    client.wait(timeout=10)  # psutil.TimeoutExpired: it outlived the harness
