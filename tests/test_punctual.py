"""The punctual children's protocol (harness.engines.punctual): the ready
line read without taking what follows it, a child that acts at once, one
that never gets ready."""
import os
import select
import subprocess
import time

import pytest

from harness.engines.punctual import Punctual, read_line


def test_the_ready_line_is_read_without_the_outcome_behind_it():
    r, w = os.pipe()
    try:
        os.write(w, b'ready\n{"acted": 1}\n')
        assert read_line(r, 5.0) == b"ready\n"
        assert select.select([r], [], [], 1.0)[0], "the outcome was taken with the ready line"
        assert os.read(r, 100) == b'{"acted": 1}\n'  # left in the pipe, for communicate()
    finally:
        os.close(r)
        os.close(w)


def test_a_line_that_never_comes_ends_at_the_bound():
    r, w = os.pipe()
    try:
        os.write(w, b"rea")
        started = time.monotonic()
        assert read_line(r, 0.3) == b"rea"
        assert 0.3 <= time.monotonic() - started < 3
    finally:
        os.close(r)
        os.close(w)


def test_a_child_that_acts_at_once_gives_its_outcome():
    gone = subprocess.Popen(["true"])
    gone.wait()
    killer = Punctual("harness.engines.core_killer", {"pid": gone.pid, "observations": None, "offset": 0,
                                                      "requests": 1, "delay_s": 0, "timeout_s": 1})
    outcome = killer.outcome(30)
    assert outcome["killed_at"] is None and "gone already" in outcome["error"], outcome


def test_a_child_that_never_gets_ready_is_an_error_with_its_words():
    with pytest.raises(RuntimeError, match="harness.engines.no_such_child was not ready.*No module named"):
        Punctual("harness.engines.no_such_child", {})
