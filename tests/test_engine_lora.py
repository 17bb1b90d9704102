"""LoRA adapters per request on the real CPU engine (the tiny Gemma4 with
tower/connector LoRA): one batch of base and two adapters answers each as
that adapter alone does, the observer sees the step that held all three
under their names, and the families name the layers vLLM wraps. One engine
start. The lora-ignore-vision-mlp fault is shown by the scenario's mutation
run (tests/test_mutations.py), which names the family it silences."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from fixtures.adapters import AdapterSpec, build_adapter
from harness.engines.base import LoraAdapter, Sampling, per_conversation
from harness.engines.observations import step_adapters, wrapped_lora_modules
from harness.engines.offline import OfflineEngine
from harness.engines.openai_engine import AdapterLoadFailed, OpenAIEngine
from harness.engines.results import Completion
from harness.lora.families import FAMILIES
from harness.workloads import vision
from harness.workloads.chat import user

LORA_ARGS = {"enable_lora": True, "max_lora_rank": 8, "max_loras": 4,
             "enable_tower_connector_lora": True}
SAMPLING = Sampling(max_tokens=6)
# The probes' module families, one each.
PROBES = {"lm": "language.q", "tq": "vision.q", "gate": "vision.gate"}


# --- without an engine ------------------------------------------------------

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


# --- on the engine ----------------------------------------------------------

@pytest.fixture(scope="module")
def adapters(tiny_gemma4, tmp_path_factory):
    # Three adapters: the last slot (max_loras - 1) stays empty (finding 007).
    return {name: LoraAdapter(name, str(build_adapter(tiny_gemma4[0], AdapterSpec(name, (family,)))), i + 1)
            for i, (name, family) in enumerate(PROBES.items())}


@pytest.fixture(scope="module")
def engine(tiny_gemma4, interpreter, tmp_path_factory):
    model, args = tiny_gemma4
    engine = OfflineEngine(model, args | LORA_ARGS, interpreter, tmp_path_factory.mktemp("lora") / "engine.log")
    engine.start()
    yield engine
    assert engine.close() == []


@pytest.fixture(scope="module")
def image_conv():
    return vision.encoder_workload(1, video_frames=4, videos=0).requests[0].conversation


def _tokens(results):
    assert all(isinstance(r, Completion) for r in results), results
    return [r.token_ids for r in results]


@pytest.mark.engine
def test_each_request_runs_its_own_adapter_in_one_batch(engine, adapters, image_conv):
    lm, tq = adapters["lm"], adapters["tq"]
    offset = engine.observations.mark()
    batch = _tokens(engine.chat([image_conv] * 3, SAMPLING, adapters=[None, lm, tq]))
    events = engine.observations.since(offset)
    alone = [_tokens(engine.chat([image_conv], SAMPLING, adapters=[a]))[0] for a in (None, lm, tq)]
    [plain] = _tokens(engine.chat([image_conv], SAMPLING))
    # The premise: each adapter changes the answer, and not as the other does.
    assert len({tuple(t) for t in alone}) == 3, alone
    assert batch == alone
    assert batch[0] == plain
    # Observed inside the engine: one step held all three, each under its name.
    both = [s for s in step_adapters(events) if len(s) == 3]
    assert both and sorted(both[0].values(), key=str) == [None, "lm", "tq"], step_adapters(events)
    [encoder] = [e for e in events if e["event"] == "encoder"]
    assert encoder["tower_lora"] == {"active": True, "adapters": [None, "lm", "tq"]}, encoder


@pytest.mark.engine
def test_the_families_name_the_layers_vllm_wraps(engine):
    wrapped = wrapped_lora_modules(engine.observations.since(0))
    assert wrapped, "the engine reported no LoRA layers"
    for name in ("vision.q", "vision.k", "vision.v", "vision.o", "vision.gate", "vision.up",
                 "vision.down", "connector.vision"):
        assert [m for m in wrapped if re.fullmatch(FAMILIES[name].vllm_pattern, m)], (name, wrapped)
    for name in ("language.q", "language.gate", "language.down"):
        assert len([m for m in wrapped if re.fullmatch(FAMILIES[name].vllm_pattern, m)]) == 2, name
