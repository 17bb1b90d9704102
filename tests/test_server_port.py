"""The port a server is given: below the kernel's ephemeral range, so that
no other process's socket takes it in the half minute before vLLM binds it."""
import random
import socket

from harness.engines import server


def test_a_server_port_lies_below_the_ephemeral_range_and_is_free():
    low = server.ephemeral_low()
    with socket.socket() as s:  # what the kernel hands out: the range other sockets share
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] >= low
    for seed in range(20):
        port = server.free_port(random.Random(seed))
        assert server.LOWEST_PORT <= port < low and server.port_free(port)


def test_a_taken_port_is_never_handed_out():
    rng = random.Random(7)
    first = server.free_port(random.Random(7))
    with socket.socket() as s:
        s.bind(("127.0.0.1", first))
        s.listen()
        assert server.free_port(rng) != first


def test_with_no_room_below_the_range_any_free_port(tmp_path, monkeypatch):
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text(f"{server.LOWEST_PORT + 10}\t60999\n")
    monkeypatch.setattr(server, "EPHEMERAL_RANGE", narrow)
    assert server.ephemeral_low() == server.LOWEST_PORT + 10
    assert server.port_free(server.free_port())
