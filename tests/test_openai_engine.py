"""The OpenAI driver's crash-behind-5xx rule, on a stub engine: a server whose
engine core just died answers its in-flight requests with a 500, and that
500 is the crash, not a verdict on the input."""
import time

import pytest

from harness.verdicts import Cause, DetailedCause
from harness.engines import openai_engine
from harness.engines.openai_engine import OpenAIEngine
from harness.engines.outcomes import Completion, EngineCrashed, Rejected, cause_of

WAIT_S = 0.3


class StubEngine(OpenAIEngine):
    """Dies `dies_after_s` after it is first asked (never, if None); its
    /health answers 200 once `healthy_after_s` has passed (never, if None)."""

    def __init__(self, crash: EngineCrashed | None, dies_after_s: float | None,
                 healthy_after_s: float | None = None):
        super().__init__("stub", None, request_timeout=5.0)
        self.crash, self.dies_after_s, self.healthy_after_s = crash, dies_after_s, healthy_after_s
        self.asked_since: float | None = None

    def healthy(self, timeout: float = 2.0) -> bool:
        since = time.monotonic() - (self.asked_since or time.monotonic())
        return self.healthy_after_s is not None and since >= self.healthy_after_s

    def _death(self) -> EngineCrashed | None:
        self.asked_since = self.asked_since or time.monotonic()
        if self.dies_after_s is not None and time.monotonic() - self.asked_since >= self.dies_after_s:
            return self.crash
        return None


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    monkeypatch.setattr(openai_engine, "DEATH_AFTER_5XX_S", WAIT_S)


def answered():
    return Completion(text="ok", token_ids=[1])


@pytest.mark.parametrize("cause", [
    Cause.ENGINE_DEAD,
    DetailedCause(Cause.PYTHON_EXCEPTION, "AttributeError: 'list' object has no attribute 'squeeze'"),
], ids=["engine-dead", "python-exception"])
def test_a_5xx_from_a_dying_engine_is_the_crash(cause):
    crash = EngineCrashed(cause=cause, detail="engine core died.")
    engine = StubEngine(crash, dies_after_s=0.05)
    done, server_error, bad_input = answered(), Rejected(500, "internal error"), Rejected(400, "too long")
    results = engine._crash_behind_5xx([done, server_error, bad_input])
    assert results == [done, crash, bad_input]
    assert cause_of(results[1]) is cause


def test_a_5xx_from_a_live_engine_stays_http_5xx():
    engine = StubEngine(EngineCrashed(cause=Cause.ENGINE_DEAD), dies_after_s=None)
    server_error = Rejected(503, "overloaded")
    t0 = time.monotonic()
    results = engine._crash_behind_5xx([server_error])
    assert time.monotonic() - t0 < WAIT_S + 0.5  # bounded: it gives up on a death that never comes
    assert results == [server_error] and cause_of(results[0]) is Cause.HTTP_5XX


def test_a_5xx_from_an_engine_whose_health_answers_stays_without_waiting_out_the_bound(monkeypatch):
    monkeypatch.setattr(openai_engine, "DEATH_AFTER_5XX_S", 30.0)
    engine = StubEngine(EngineCrashed(cause=Cause.ENGINE_DEAD), dies_after_s=None, healthy_after_s=0.1)
    server_error = Rejected(500, "a handler's bug")
    t0 = time.monotonic()
    assert engine._crash_behind_5xx([server_error]) == [server_error]
    assert time.monotonic() - t0 < 2.0


def test_a_slow_death_behind_a_5xx_is_still_the_crash(monkeypatch):
    """The exit may take seconds to show on a busy machine: /health not
    answering, the wait goes on until it does."""
    monkeypatch.setattr(openai_engine, "DEATH_AFTER_5XX_S", 30.0)
    crash = EngineCrashed(cause=Cause.ENGINE_DEAD, detail="engine core died.")
    engine = StubEngine(crash, dies_after_s=1.5)
    assert engine._crash_behind_5xx([Rejected(500, "EngineCore encountered an issue")]) == [crash]


def test_a_death_later_than_the_wait_is_not_blamed_on_the_5xx():
    engine = StubEngine(EngineCrashed(cause=Cause.ENGINE_DEAD), dies_after_s=WAIT_S + 1.0)
    server_error = Rejected(500, "internal error")
    assert engine._crash_behind_5xx([server_error]) == [server_error]


def test_without_a_5xx_nothing_waits_and_a_4xx_is_untouched():
    engine = StubEngine(EngineCrashed(cause=Cause.ENGINE_DEAD), dies_after_s=0.0)  # dead already
    results = [answered(), Rejected(400, "too long"), Rejected(None, "bad audio")]
    assert engine._crash_behind_5xx(list(results)) == results
    assert engine.asked_since is None  # no 5xx: its death was never consulted
