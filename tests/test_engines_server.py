"""ServerEngine on the real CPU engine: port clash, concurrent chat, the
engine's 4xx as a result, a remote driver on the same server, SIGKILL."""
import os
import socket

import pytest

from fixtures import media
from harness.verdicts import Cause
from harness.engines.base import Sampling
from harness.engines.faults import kill_core_during
from harness.engines.outcomes import Completion, EngineCrashed, Rejected
from harness.engines.procs import group_members
from harness.engines.remote import RemoteEngine
from harness.engines.server import ServerEngine
from harness.workloads.chat import audio_part, audio_url_part, image_part, user

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def taken_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


@pytest.fixture(scope="module")
def server(tiny_gemma4, interpreter, tmp_path_factory, taken_port):
    model, args = tiny_gemma4
    eng = ServerEngine(model, args, interpreter, tmp_path_factory.mktemp("server") / "server.log",
                       port=taken_port)
    eng.start()
    yield eng
    assert eng.close() == []


def test_starts_on_another_port_when_the_requested_one_is_taken(server, taken_port):
    assert server.port != taken_port
    assert server.healthy()
    assert os.path.getsize(server.log_path) > 0  # its output goes to the scenario's log file


def test_concurrent_chat_returns_tokens_and_logprobs(server):
    results = server.chat([user(f"number {i}") for i in range(4)], Sampling(max_tokens=5))
    assert all(isinstance(r, Completion) for r in results), results
    for r in results:
        assert len(r.token_ids) == 5 and len(r.logprobs) == 5
        assert r.token_ids[0] in r.logprobs[0]
        assert r.prompt_token_count and r.prompt_token_count > 3


@pytest.mark.parametrize("part", [
    image_part(b"\x89PNG but not really", "image/png"),
    audio_part(os.urandom(2048), "wav"),
    audio_url_part(media.encode_image(media.image(32, 32, seed=1)), "audio/wav"),
], ids=["garbage-image", "random-bytes-as-wav", "png-labelled-audio"])
def test_invalid_payload_gets_the_engines_4xx_as_a_result(server, part):
    [r] = server.chat([user(part, "What is this?")], Sampling(max_tokens=2))
    assert isinstance(r, Rejected), r
    assert 400 <= r.status < 500 and r.message
    server.assert_alive()


def test_remote_driver_talks_to_a_server_it_did_not_start(server):
    remote = RemoteEngine(server.base_url, api_key=server.api_key).start()
    assert remote.served_model == server.served_model
    [a] = remote.chat([user("same prompt")], Sampling(max_tokens=4))
    [b] = server.chat([user("same prompt")], Sampling(max_tokens=4))
    assert a.token_ids == b.token_ids
    assert remote.close() == [] and server.healthy()  # closing a remote stops nothing


def test_sigkill_of_engine_core_fails_pending_requests_promptly(server):
    pgid = server.proc.pid
    results, verdict_s = kill_core_during(server, [user(f"long {i}") for i in range(6)],
                                          Sampling(max_tokens=1500, ignore_eos=True))
    assert verdict_s < 15, verdict_s
    assert all(isinstance(r, EngineCrashed) for r in results), [r.to_dict() for r in results]
    assert results[0].cause == Cause.ENGINE_DEAD
    # The verdict came first; the clean-up runs behind it, and close() waits for it.
    assert server.close() == []
    assert group_members(pgid) == []
