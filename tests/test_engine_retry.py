"""The retry policy: only a start-up failure of the infrastructure (a port
race, memory not yet free) is tried once more; an OOM, a crash, an illegal
instruction or a timeout never is. Classified from crafted log tails through
the engine's own classifier; the pool's retry shown with a stub worker."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.verdicts import Cause, CheckFailure, DetailedCause
from harness.engines import offline
from harness.engines.base import Sampling
from harness.engines.causes import classify, engine_message
from harness.engines.outcomes import EngineCrashed, EngineStartupFailed
from harness.engines.pool import EnginePool
from harness.engines.retry import MEMORY_WAIT_S, Retry, retry_for
from harness.engines.startup import never_started, startup_error
from harness.models import models_for
from harness.results.record import CheckRecord
from harness.engines.teardown import teardown_record
from harness.runner import Runner
from harness.workloads.text import text_workload

FAILING_STUB = Path(__file__).with_name("_stub_failing_worker.py")


def _traceback(*last: str) -> str:
    return "\n".join(["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', *last])


PORT_RACE = _traceback("OSError: [Errno 98] error while attempting to bind on address "
                       "('127.0.0.1', 41234): address already in use")
TORCH_PORT_RACE = _traceback("torch.distributed.DistNetworkError: The server socket has failed to listen on any "
                             "local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, "
                             "message: address already in use")
MEMORY_NOT_FREE = _traceback(
    "ValueError: Free memory on device cuda:0 (10.2/79.1 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
OOM = _traceback("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
# Memory short at start-up, and then an OOM: the OOM decides.
MEMORY_THEN_OOM = MEMORY_NOT_FREE + "\n" + OOM
BAD_CONFIG = _traceback("ValueError: max_model_len (8192) is greater than the derived max_model_len (2048)")


def _startup_failure(log: str, returncode: int | None = 1, *, timed_out: bool = False) -> EngineCrashed:
    """What the engine drivers make of a start that ended with this log."""
    lines = log.splitlines()
    cause = Cause.TIMEOUT if timed_out else classify(returncode, lines, started=False)
    return EngineCrashed(cause=cause, log_tail=lines, detail=f"engine died. {engine_message(lines)}")


@pytest.mark.parametrize("log, expected", [
    (PORT_RACE, Retry("port race", 0.0)),
    (TORCH_PORT_RACE, Retry("port race", 0.0)),
    (MEMORY_NOT_FREE, Retry("memory not yet free", MEMORY_WAIT_S)),
    (OOM, None),
    (MEMORY_THEN_OOM, None),
    (BAD_CONFIG, None),
    ("", None),  # died saying nothing
], ids=["port-race", "torch-eaddrinuse", "memory-not-free", "oom", "memory-then-oom", "bad-config", "silent"])
def test_only_the_infrastructures_failures_are_retried(log, expected):
    assert retry_for(_startup_failure(log)) == expected


@pytest.mark.parametrize("crash", [
    _startup_failure(PORT_RACE, -4),  # SIGILL: the engine's, whatever else its log says
    _startup_failure(PORT_RACE, timed_out=True),
    EngineCrashed(cause=Cause.ENGINE_DEAD, log_tail=PORT_RACE.splitlines()),
    EngineCrashed(cause=DetailedCause(Cause.PYTHON_EXCEPTION, "OSError: address already in use"),
                  log_tail=PORT_RACE.splitlines()),
    EngineCrashed(cause=Cause.MISMATCH, detail="Free memory on device on startup is less than"),
], ids=["sigill", "timeout", "crash-after-start", "python-exception", "mismatch"])
def test_a_crash_a_timeout_or_a_mismatch_is_never_retried(crash):
    assert retry_for(crash) is None


@pytest.fixture
def failing_pool(monkeypatch, interpreter, tmp_path):
    """A pool whose offline engines are the failing stub: get(failures, log) starts one."""
    monkeypatch.setattr(offline, "WORKER", FAILING_STUB)
    pool = EnginePool(interpreter, tmp_path / "engines", watch_memory=False)

    def get(failures: int, log: str):
        env = {"MMHARNESS_STUB_COUNT": str(tmp_path / "starts"), "MMHARNESS_STUB_FAILURES": str(failures),
               "MMHARNESS_STUB_FAILURE": log}
        return pool.get(pool.spec("offline", "no-model", env=env, name="stub"), label="s")
    yield pool, get
    pool.close_all()


def test_a_lost_port_race_is_retried_once_and_shown(failing_pool, tmp_path):
    pool, get = failing_pool
    told = []
    pool.on_start = told.append
    handle = get(1, PORT_RACE)
    engine = handle.engine
    assert engine.ready
    assert [(t.log.name, t.outcome) for t in told] == [  # what the progress lines show
        ("01-offline-stub.log", None), ("01-offline-stub.log", "retrying: port race"),
        ("02-offline-stub.log", None), ("02-offline-stub.log", "ready")]
    assert told[1].seconds > 0 and told[3].seconds > 0
    [attempt] = handle.attempts
    assert attempt["retried"] == "port race" and attempt["cause"] == Cause.STARTUP_FAILED.value
    assert "address already in use" in Path(attempt["log"]).read_text()  # the failed start's own log
    assert Path(attempt["log"]) != engine.log_path
    pool.close_all()
    [entry] = pool.retired
    assert teardown_record(entry).evidence["start_attempts"] == [attempt]  # the engine's record shows it


def test_a_second_failure_is_not_retried(failing_pool, tmp_path):
    pool, get = failing_pool
    with pytest.raises(EngineStartupFailed) as failed:
        get(5, PORT_RACE)
    assert [a["retried"] for a in failed.value.attempts] == ["port race", None]
    assert (tmp_path / "starts").read_text() == "2"  # at most once more


def test_a_check_on_an_engine_that_never_started_shows_its_attempts(failing_pool, tmp_path):
    pool, get = failing_pool
    env = {"MMHARNESS_STUB_COUNT": str(tmp_path / "starts"), "MMHARNESS_STUB_FAILURES": "5",
           "MMHARNESS_STUB_FAILURE": PORT_RACE}
    runner = Runner(models_for("cpu")[0], "no-model", "family", pool, env=env,
                    on_engine=lambda engine: None)
    run = runner.batch(text_workload(), Sampling())
    with pytest.raises(CheckFailure) as failed:
        run.outcomes
    assert [a["retried"] for a in failed.value.evidence["start_attempts"]] == ["port race", None]


def test_a_check_whose_engine_died_of_oom_before_it_was_ready_reads_as_never_started(failing_pool, tmp_path):
    """The record says the engine never started whatever its cause: a
    bisect counts such a step untestable, never a failure of the check."""
    pool, _ = failing_pool
    env = {"MMHARNESS_STUB_COUNT": str(tmp_path / "starts"), "MMHARNESS_STUB_FAILURES": "5",
           "MMHARNESS_STUB_FAILURE": OOM}
    runner = Runner(models_for("cpu")[0], "no-model", "family", pool, env=env, on_engine=lambda engine: None)
    with pytest.raises(CheckFailure) as failed:
        runner.batch(text_workload(), Sampling()).outcomes
    record = CheckRecord(id="c", verdict="fail", cause=failed.value.cause, message=failed.value.message,
                         evidence=failed.value.evidence)
    assert record.cause == Cause.OOM.value and never_started(record)
    assert startup_error(record).line == "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_an_oom_at_start_up_is_not_retried(failing_pool, tmp_path):
    pool, get = failing_pool
    with pytest.raises(EngineStartupFailed) as failed:
        get(1, OOM)
    assert failed.value.crash.cause == Cause.OOM
    assert [a["retried"] for a in failed.value.attempts] == [None]
    assert (tmp_path / "starts").read_text() == "1"
