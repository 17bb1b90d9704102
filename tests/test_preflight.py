"""Preflight: a broken set-up stops the run in seconds with one message
naming the problem (harness/preflight/, harness/plugins/preflight.py).

The end-to-end cases run pytest on scenarios/ as a user would, against real
sockets on 127.0.0.1: nothing listening, and a tiny HTTP server that serves
another model. No engine starts in any of them."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engines.interpreter import EngineInterpreter
from harness.memory.nvml import nvml_unavailable_reason
from harness.models import models_for
from harness.preflight import Needs, problems, storage
from harness.preflight.devices import gpu_problems
from harness.preflight.endpoint import endpoint_problems, serves
from harness.preflight.interpreter import interpreter_problems
from harness.results.status import ExitStatus
from harness.units import GiB

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
STOP_BOUND_S = 30.0
CPU = {e.name: e for e in models_for("cpu")}
GPU = {e.name: e for e in models_for("gpu")}


def _run_scenarios(tmp_path: Path, *args: str, env: dict | None = None):
    """pytest on scenarios/ as `make run` runs it; (process, seconds it took)."""
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest", "scenarios", "-q", "-p", "no:cacheprovider",
                          "--results-dir", str(tmp_path / "run"), "--history", str(tmp_path / "h.jsonl"),
                          *args], cwd=ROOT, capture_output=True, text=True, timeout=2 * STOP_BOUND_S,
                         env={**os.environ, **(env or {})})
    return out, time.monotonic() - started


def _assert_stopped(out, took: float, tmp_path: Path, *says: str, returncode: int = ExitStatus.USAGE) -> None:
    text = out.stdout[-3000:] + out.stderr[-3000:]
    assert out.returncode == returncode, text
    assert took < STOP_BOUND_S, f"took {took:.1f} s\n{text}"
    assert out.stderr.count("ERROR: preflight:") == 1 and "Traceback" not in text, text
    for words in says:
        assert words in out.stderr, text
    assert not (tmp_path / "run").exists()  # no check ran, no run was left behind


@pytest.mark.skipif(nvml_unavailable_reason() is None, reason="this machine has a GPU NVML sees")
def test_gpu_tier_on_a_machine_without_gpus_stops_at_once(tmp_path):
    out, took = _run_scenarios(tmp_path, "--tier", "gpu")
    _assert_stopped(out, took, tmp_path, "GPU tier: no GPU to run on")


@pytest.mark.skipif(nvml_unavailable_reason() is None, reason="this machine has a GPU NVML sees")
def test_make_nightly_on_a_machine_without_gpus_stops_at_once(tmp_path):
    started = time.monotonic()
    out = subprocess.run(["make", "-o", "setup", "nightly",
                          f"RUN_ARGS=--results-dir {tmp_path / 'run'} --history {tmp_path / 'h.jsonl'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=2 * STOP_BOUND_S)
    took = time.monotonic() - started
    assert "--tier gpu" in out.stdout and "-n 0 --dist loadscope" in out.stdout, out.stdout  # no GPU, no worker
    assert f"Error {ExitStatus.USAGE.value}" in out.stderr, out.stderr[-3000:]  # the command's status
    _assert_stopped(out, took, tmp_path, "GPU tier: no GPU to run on", returncode=2)  # make's own


def test_an_engine_url_with_nothing_listening_stops_at_once(tmp_path):
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    out, took = _run_scenarios(tmp_path, "--engine-url", url)
    _assert_stopped(out, took, tmp_path, f"--engine-url {url}: no server answers there")


class _OpenAIModels(BaseHTTPRequestHandler):
    """An OpenAI-compatible front that serves one model and nothing else."""
    models: list[dict] = []

    def do_GET(self):
        routes = {"/health": b"", "/v1/models": json.dumps({"object": "list", "data": self.models}).encode()}
        body = routes.get(self.path)
        self.send_response(404 if body is None else 200)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def models_server():
    """Start a server on 127.0.0.1 answering /v1/models with the given
    entries; yields a function (models) -> its URL."""
    servers = []

    def serve(models: list[dict]) -> str:
        handler = type("Handler", (_OpenAIModels,), {"models": models})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"
    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_an_engine_url_serving_another_model_stops_at_once(tmp_path, models_server):
    url = models_server([{"id": "another-model", "object": "model", "root": "org/another-model"}])
    out, took = _run_scenarios(tmp_path, "--engine-url", url, "--model", "tiny-gemma4")
    _assert_stopped(out, took, tmp_path, f"--engine-url {url} serves another-model (org/another-model), "
                                         "not tiny-gemma4")


def test_a_server_is_matched_by_name_hub_id_or_tiny_build_directory():
    gemma4, awq = CPU["tiny-gemma4"], CPU["tiny-gemma4-awq"]
    build = {"id": "model", "root": "/cache/tiny-models/gemma4-5fe699456e4ad9479c39"}
    assert serves([build], gemma4) and not serves([build], awq)  # gemma4-awq-<hash> is another build
    assert serves([{"id": "tiny-gemma4-awq"}], awq)
    assert serves([{"id": "x", "root": "google/gemma-4-E2B-it"}], GPU["gemma-4-e2b"])
    assert not serves([{"id": "google/gemma-3n-E2B-it"}], GPU["gemma-4-e2b"])


def test_every_entry_the_server_does_not_serve_is_named(models_server):
    url = models_server([{"id": "tiny-gemma4"}])
    assert endpoint_problems(url, (CPU["tiny-gemma4"],)) == []
    [problem] = endpoint_problems(url, (CPU["tiny-gemma4"], CPU["tiny-gemma3n"], CPU["tiny-gemma4-awq"]))
    assert "serves tiny-gemma4, not tiny-gemma3n, tiny-gemma4-awq" in problem and "--model" in problem


def _nvml_with(fake_nvml, used_gib: float, total_gib: float = 80, devices: int = 2):
    return fake_nvml([int(used_gib * GiB)], {}, devices=devices, total=int(total_gib * GiB))


def test_gpus_without_the_free_memory_an_engine_asks_for_are_a_problem(fake_nvml):
    entry = GPU["gemma-4-e2b"]
    assert gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=4)) == []  # 76 of 80 free, 0.9 asked
    [problem] = gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=20))
    assert "0.9 of the device" in problem and "GPU 0: 60.0 of 80.0 GiB free" in problem and "GPU 1:" in problem
    assert gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=4, devices=0)) == [
        "GPU tier: NVML sees no GPU device (is CUDA_VISIBLE_DEVICES empty?)"]


def test_only_the_runs_gpus_count_and_they_must_exist(fake_nvml):
    entry = GPU["gemma-4-e2b"]
    [problem] = gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=20), environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert "GPU 1: 60.0 of 80.0 GiB free" in problem and "GPU 0" not in problem
    assert gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=4), environ={"CUDA_VISIBLE_DEVICES": "1,3"}) == [
        "GPU tier: CUDA_VISIBLE_DEVICES names GPU 3, but NVML sees 2 (0 to 1)"]
    [problem] = gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=4), environ={"CUDA_VISIBLE_DEVICES": "GPU-a1"})
    assert "not UUIDs" in problem


def test_a_familys_engine_arguments_raise_the_share_asked_for(fake_nvml):
    entry = replace(GPU["gemma-4-e2b"], per_family={"test_vision_lora": {"gpu_memory_utilization": 0.97}})
    free_76_of_80 = _nvml_with(fake_nvml, used_gib=4)
    assert gpu_problems((entry,), free_76_of_80, families=("test_ragged_audio",)) == []
    [problem] = gpu_problems((entry,), _nvml_with(fake_nvml, used_gib=4),
                             families=("test_ragged_audio", "test_vision_lora"))
    assert "0.97 of the device" in problem


def test_an_engine_interpreter_that_cannot_run_the_probe_is_a_problem(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'no module named vllm' >&2\nexit 3\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    [problem] = interpreter_problems(EngineInterpreter(python), gpu=False)
    assert problem.startswith(f"engine interpreter: {python} cannot run the engine probe (exit 3)")
    assert "no module named vllm" in problem


def test_a_tiny_model_the_interpreter_cannot_build_stops_the_run_naming_interpreter_and_package(monkeypatch):
    from harness import preflight
    from harness.engines import supplies
    from harness.plugins.preflight import stop_if_missing

    monkeypatch.setattr(supplies, "_harness_has", lambda name: False)
    monkeypatch.setattr(preflight, "tiny_cache_problems", lambda: [])
    lacking = SimpleNamespace(identity={"python": "/plain/bin/python", "timm": None})
    assert problems(Needs("cpu", entries=(CPU["tiny-gemma4"],), interpreter=lacking)) == []
    [problem] = problems(Needs("cpu", entries=(CPU["tiny-gemma4"], CPU["tiny-gemma3n"]), interpreter=lacking))
    assert problem.startswith("engine interpreter /plain/bin/python: building the tiny gemma3n needs timm")
    with pytest.raises(pytest.UsageError, match="no check ran") as stopped:  # exit status 4
        stop_if_missing(Needs("cpu", entries=(CPU["tiny-gemma3n"],), interpreter=lacking))
    assert str(stopped.value).count("\n  - ") == 1  # one message


def test_the_cpu_engine_on_the_gpu_tier_is_a_problem(interpreter):
    assert interpreter_problems(interpreter, gpu=False) == []
    if interpreter.identity["cuda"] is None:
        [problem] = interpreter_problems(interpreter, gpu=True)
        assert "sees no CUDA device" in problem and "--engine-python" in problem


def test_gated_checkpoints_not_in_the_cache_need_a_hub_token(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty cache
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    gated, open_ = GPU["gemma-4-e2b"], GPU["gemma-4-26b-a4b-awq"]
    [problem] = storage.hub_problems([gated, open_], download=False)
    assert problem.startswith("gemma-4-e2b: gated on the hub") and "HF_TOKEN" in problem
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    assert storage.hub_problems([gated, open_], download=False) == []
    monkeypatch.setattr(storage, "HUB_DOWNLOAD_ROOM", 1 << 60)  # more than any disk has
    [problem] = storage.hub_problems([gated, open_], download=True)
    assert "2 checkpoint(s)" in problem and str(tmp_path / "hub") in problem
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    [problem] = storage.hub_problems([open_], download=False)
    assert "HF_HUB_OFFLINE" in problem


def test_a_full_disk_for_the_tiny_builds_is_a_problem(tmp_path, monkeypatch):
    monkeypatch.setenv("MMHARNESS_CACHE", str(tmp_path / "cache"))
    assert storage.tiny_cache_problems() == []
    monkeypatch.setattr(storage, "TINY_CACHE_ROOM", 1 << 60)
    [problem] = storage.tiny_cache_problems()
    assert str(tmp_path / "cache") in problem and "MMHARNESS_CACHE" in problem


def test_only_what_the_selection_needs_is_checked(monkeypatch):
    """No device is looked at when no engine starts, no server asked without
    --engine-url, no cache without a model."""
    from harness import preflight

    asked = []
    for name in ("gpu_problems", "cpu_problems", "interpreter_problems", "endpoint_problems",
                 "hub_problems", "tiny_cache_problems"):
        monkeypatch.setattr(preflight, name, lambda *a, name=name, **k: asked.append(name) or [])
    assert problems(Needs("gpu")) == [] and asked == []
    problems(Needs("gpu", entries=(GPU["gemma-4-e2b"],), starts_engines=True))
    assert asked == ["gpu_problems", "hub_problems"]
    asked.clear()
    problems(Needs("cpu", entries=(CPU["tiny-gemma4"],), engine_url="http://127.0.0.1:1"))
    assert asked == ["endpoint_problems", "tiny_cache_problems"]
    asked.clear()
    problems(Needs("cpu", entries=(CPU["tiny-gemma4"],), starts_engines=True, interpreter=object()))
    assert asked == ["cpu_problems", "tiny_cache_problems", "interpreter_problems"]


def test_the_interpreters_probe_waits_until_the_instant_checks_pass(monkeypatch):
    from harness import preflight

    monkeypatch.setattr(preflight, "endpoint_problems", lambda *a: ["nothing answers"])
    monkeypatch.setattr(preflight, "interpreter_problems", lambda *a, **k: pytest.fail("probed"))
    assert problems(Needs("cpu", engine_url="http://127.0.0.1:1", interpreter=object())) == ["nothing answers"]


def _remote_run_on_workers(pytester, workers: int):
    """A one-check family run on `workers` xdist workers against a server that is not there."""
    pytester.makeconftest('pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records", '
                          '"harness.plugins.matrix", "harness.plugins.engines", "harness.plugins.preflight"]\n')
    pytester.makepyfile(test_family="def test_check(model_entry, check_record):\n    pass\n")
    return pytester.runpytest("-p", "xdist", "-n", str(workers), "--engine-url", "http://127.0.0.1:1",
                              f"--results-dir={pytester.path / 'run'}")


def test_under_xdist_the_controller_checks_before_any_worker_starts(pytester):
    """Only xdist's workers collect: the controller checks what the options select."""
    result = _remote_run_on_workers(pytester, 1)
    assert result.ret == ExitStatus.USAGE
    result.stderr.fnmatch_lines(["ERROR: preflight: *", "  - --engine-url http://127.0.0.1:1: no server answers there*"])
    assert "bringing up nodes" not in result.stdout.str() and not (pytester.path / "run").exists()


def test_one_remote_server_is_never_shared_by_two_workers(pytester):
    """Two workers would send their modules' checks to the one server at
    once: a one-step premise could never hold. Refused before any worker."""
    result = _remote_run_on_workers(pytester, 2)
    assert result.ret == ExitStatus.USAGE
    result.stderr.fnmatch_lines(["ERROR: --engine-url: one server serves every check*RUN_WORKERS=0)"])
