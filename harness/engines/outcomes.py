"""What every engine driver returns for one request."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.verdicts import AnyCause, Cause

# A Completion's finish reason when its client went away before the end
# (OpenAIEngine.chat_abandoning), without reading its tokens.
ABANDONED = "abandoned"


@dataclass
class Completion:
    """A successful generation."""
    text: str
    token_ids: list[int]
    # Per generated position: {token_id: logprob} of the top-k candidates.
    logprobs: list[dict[int, float]] = field(default_factory=list)
    prompt_token_count: int | None = None
    # Offline only: the prompt as the engine tokenized it, placeholders expanded.
    prompt_token_ids: list[int] | None = None
    # Prompt tokens served from the engine's prefix cache (None: not reported).
    cached_tokens: int | None = None
    finish_reason: str | None = None
    # Offline only: which generate call served it, and how many prompts it had.
    batch_call: int | None = None
    batch_size: int | None = None
    # Streamed server requests only: seconds from sending to the first token and to the last.
    ttft_s: float | None = None
    e2e_s: float | None = None

    ok = True

    def to_dict(self) -> dict:
        return asdict(self)


class NotForced(Exception):
    """A stack could not be forced along the given tokens (a comparator's
    follower): says why, so the comparator can say what it left unscored."""


@dataclass
class Rejected:
    """The engine refused the request: an HTTP error from a server (a 4xx is a
    verdict about the input, a 5xx a failure), or an offline input error
    (status None)."""
    status: int | None
    message: str

    ok = False

    @property
    def is_client_error(self) -> bool:
        return self.status is None or 400 <= self.status < 500

    def to_dict(self) -> dict:
        return {"rejected": self.status, "message": self.message}


@dataclass(frozen=True)
class EngineCrashed:
    """The engine (or one of its processes) died while the request was
    pending, or hung (no progress within the stall bound) and was given up
    on. Frozen: its cause is decided when it is built, never patched afterwards."""
    cause: AnyCause
    exit_code: int | None = None
    signal: str | None = None
    log_tail: list[str] = field(default_factory=list)
    detail: str = ""
    # A hang only: the stalled request (harness.engines.progress.Stall) and
    # every engine process's stacks at the verdict.
    stall: dict | None = None
    stacks: dict = field(default_factory=dict)

    ok = False

    def to_dict(self) -> dict:
        return asdict(self) | {"cause": self.cause.value, "crashed": True}


@dataclass
class RequestTimedOut:
    """No answer within the request bound, while the engine still looked alive."""
    seconds: float

    ok = False
    cause = Cause.TIMEOUT

    def to_dict(self) -> dict:
        return {"timeout_s": self.seconds}


Result = Completion | Rejected | EngineCrashed | RequestTimedOut


class EngineStartupFailed(RuntimeError):
    """The engine never became ready. Carries the same evidence as a crash."""

    def __init__(self, crash: EngineCrashed):
        self.crash = crash
        # Every failed start of this engine, this one last, where the pool retried (harness.engines.retry).
        self.attempts: list[dict] = []
        tail = "\n".join(crash.log_tail[-30:])
        super().__init__(f"engine start-up failed ({crash.cause.value}; exit={crash.exit_code}, "
                         f"signal={crash.signal}): {crash.detail}\n{tail}")


def cause_of(result: Result) -> AnyCause | None:
    """None for a completion; else the cause a failure would carry."""
    if isinstance(result, Completion):
        return None
    if isinstance(result, Rejected):
        return Cause.HTTP_5XX if (result.status or 0) >= 500 else Cause.HTTP_4XX
    return result.cause  # EngineCrashed, RequestTimedOut
