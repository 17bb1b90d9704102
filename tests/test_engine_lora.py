"""LoRA adapters per request, without an engine: one adapter (or none) per
conversation, and the server's load/unload of an adapter against a stand-in
that answers as vLLM 0.32.0's routes do. On the real engine the family's
own run shows the rest (tests/test_scenario_vision_lora.py: each request
under its adapter in one observed step, the layers vLLM wraps), and its
mutation run the lora-ignore-vision-mlp fault (tests/test_mutations.py)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from harness.engines.base import LoraAdapter, per_conversation
from tests.observed_events import step_adapters, wrapped_lora_modules
from harness.engines.openai_engine import AdapterLoadFailed, OpenAIEngine


def test_adapter_ids_are_vllm_lora_int_ids():
    with pytest.raises(ValueError, match="id must be >= 1"):
        LoraAdapter("a", "/x", 0)


def test_one_adapter_per_conversation_or_none_for_all():
    a = LoraAdapter("a", "/x", 1)
    assert per_conversation(None, 2) == [None, None]
    assert per_conversation([a, None], 2) == [a, None]
    with pytest.raises(ValueError, match="2 adapters for 3 conversations"):
        per_conversation([a, None], 3)
    with pytest.raises(TypeError):
        per_conversation([{"name": "a"}], 1)


def test_observed_adapters_per_step_and_wrapped_modules():
    events = [{"event": "lora_modules", "modules": ["x.q"]},
              {"event": "step", "tokens": {"r1": 3}},  # an engine without LoRA
              {"event": "step", "tokens": {"r1": 3, "r2": 3}, "loras": {"r1": None, "r2": "a"}}]
    assert step_adapters(events) == [{"r1": None, "r2": "a"}]
    assert wrapped_lora_modules(events) == ["x.q"]
    assert wrapped_lora_modules(events[1:]) is None


class _FakeVllm(BaseHTTPRequestHandler):
    """vLLM's adapter routes as 0.32.0 answers them (serving.py)."""
    loaded: dict = {}
    calls: list = []
    mounted = True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.calls.append((self.path, body))
        if not self.mounted:
            return self._send(404, {"detail": "Not Found"})
        name = body["lora_name"]
        if self.path == "/v1/unload_lora_adapter":
            if name not in self.loaded:
                return self._send(404, {"error": {"message": f"The lora adapter '{name}' cannot be found.",
                                                  "type": "NotFoundError", "code": 404}})
            del self.loaded[name]
            return self._send(200, f"Success: LoRA adapter '{name}' removed successfully.")
        if name in self.loaded:
            return self._send(400, {"error": {"message": f"The lora adapter '{name}' has already been loaded.",
                                              "type": "InvalidUserInput", "code": 400}})
        self.loaded[name] = body["lora_path"]
        return self._send(200, f"Success: LoRA adapter '{name}' added successfully.")

    def _send(self, status, body):
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    _FakeVllm.loaded, _FakeVllm.calls, _FakeVllm.mounted = {}, [], True
    httpd = HTTPServer(("127.0.0.1", 0), _FakeVllm)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    engine = OpenAIEngine("fake", None, request_timeout=5)
    engine.base_url = f"http://127.0.0.1:{httpd.server_port}"
    yield engine
    httpd.shutdown()


def test_reload_unloads_then_loads_under_the_same_name(fake_server):
    fake_server.load_adapter(LoraAdapter("probe", "/a", 1))
    fake_server.load_adapter(LoraAdapter("probe", "/b", 2))
    assert _FakeVllm.loaded == {"probe": "/b"}
    assert [p for p, _ in _FakeVllm.calls] == ["/v1/unload_lora_adapter", "/v1/load_lora_adapter"] * 2
    assert _FakeVllm.calls[-1][1] == {"lora_name": "probe", "lora_path": "/b"}


def test_a_refused_load_says_the_servers_reason(fake_server):
    fake_server.load_adapter(LoraAdapter("probe", "/a", 1))
    with pytest.raises(AdapterLoadFailed, match="already been loaded") as refused:
        fake_server.load_adapter(LoraAdapter("probe", "/b", 2), replace=False)
    assert refused.value.status == 400
    _FakeVllm.mounted = False
    with pytest.raises(AdapterLoadFailed, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
        fake_server.load_adapter(LoraAdapter("probe", "/b", 2))


def test_an_unanswered_load_is_bounded():
    engine = OpenAIEngine("nowhere", None, request_timeout=5)
    engine.base_url = "http://127.0.0.1:9"  # discard port: nothing listens
    with pytest.raises(AdapterLoadFailed, match="no answer"):
        engine.load_adapter(LoraAdapter("probe", "/a", 1), timeout=2)
