"""--engine-url: scenarios against a server the harness did not start. Only
server-kind checks run; offline ones are skipped with the reason, and solo
references come from solo requests to the same server."""
import pytest

from harness.engines.server import ServerEngine
from tests.scenario_runs import run_scenarios

pytestmark = pytest.mark.engine


def test_ragged_audio_against_a_remote_server(tiny_gemma4, interpreter, tmp_path, monkeypatch):
    model, args = tiny_gemma4
    with ServerEngine(model, args, interpreter, tmp_path / "server.log", served_model="remote-gemma4") as server:
        server.start()
        monkeypatch.setenv("MMHARNESS_ENGINE_API_KEY", server.api_key)
        records, out = run_scenarios(
            "test_ragged_audio.py", tmp_path, "--engine-url", server.base_url,
            "--model", "tiny-gemma4", "-k", "normal or one_pass or edge_input and silence")
        assert server.healthy()  # the harness never stops what it did not start
    load = records["test_concurrent_matches_solo[normal-tiny-gemma4]"]
    assert load.verdict == "pass", load
    assert load.evidence["reference"] == "remote engine, each_alone"  # the same server, solo
    assert load.evidence["engines"] == {"concurrent": "remote:vllm", "each_alone": "remote:vllm"}
    assert load.engine == "remote:vllm" and load.engine_version == "0.32.0"
    assert records["test_edge_input[tiny-gemma4-silence]"].verdict == "pass"
    offline = records["test_one_pass[ragged-tiny-gemma4]"]
    assert offline.verdict == "skip" and "--engine-url" in offline.message
    assert out.returncode == 0, out.stdout[-2000:]
