"""What one run of a workload left: its outcomes, and the engine use
(engine, log window, memory window) they came from.

A run whose engine never started still exists: reading its outcomes raises
the start-up failure, so every check that needs the engine fails with the
engine's cause, and checks that need only the workload still run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from harness.checks.comparators import Follow
from harness.checks.requests import check_completed
from harness.verdicts import CheckFailure
from harness.engines.base import Engine, LogWindow
from harness.engines.outcomes import Result
from harness.engines.pool import EngineHandle
from harness.memory.samplers import SamplerResult
from harness.memory.watch import MemoryWatch
from harness.models import ModelEntry
from harness.workloads.request import Workload


@dataclass(eq=False)
class EngineUse:
    """One use of a (possibly shared) engine: a check's workload on it, named by
    its label (`family[model-workload-role]`)."""
    kind: str
    label: str
    entry: ModelEntry
    engine: Engine | None = None
    # The pool's handle of the engine (its watch, failed starts, crash,
    # eviction); None for what no pool started (HF transformers).
    handle: EngineHandle | None = None
    failure: CheckFailure | None = None  # the engine never became ready
    window: LogWindow | None = None
    watch: MemoryWatch | None = None
    t0: float = 0.0  # the sampler's clock when the scenario began
    args: dict = field(default_factory=dict)  # the engine's arguments, as the runner gave them
    version: str | None = None  # the engine's version, known from its interpreter even if it never started
    # What chooses the engine's kernels (harness.engines.hosts): the key of its noise profiles.
    host_kind: str | None = None
    host_assumed: str | None = None  # why the host kind is assumed, not observed (a remote server)
    # Starts this use's engine again through the pool (a follower that comes
    # after its engine was retired); None where nothing can (HF transformers).
    reopen: Callable[[], Engine] | None = None

    def require(self) -> Engine:
        if self.failure:
            raise self.failure
        return self.engine

    def memory(self) -> SamplerResult | None:
        """Memory from the scenario's start until now."""
        return self.watch.window(self.t0) if self.watch else None

    def live(self) -> Engine:
        """This use's engine to send to now: itself while it is up (or
        crashed: its verdict is its crash), else an engine of the same spec
        started again through the pool, where this one was retired since."""
        engine = self.require()
        if engine.ready or engine.crashed or self.reopen is None:
            return engine
        return self.reopen()


@dataclass(frozen=True)
class Sent:
    """What sending a workload left: the engine use, each request's outcome
    (none where the engine never started), what the engine's own processes
    recorded meanwhile (steps, encoder calls; None: not observable), and the
    follower: (label, forced tokens) -> that request's answer continuing
    them on the same stack (None where the stack takes no forced tokens)."""
    use: EngineUse
    outcomes: list[Result] = field(default_factory=list)
    observed: list[dict] | None = None
    follow: Callable[[str, list[int]], Result] | None = None


class Run:
    """A workload run one way: `Run.sent` for one already sent, or
    `Run.deferred` for one sent when first read, so checks that never read
    it (a premise check, say) cost no engine start."""

    def __init__(self, how: str, workload: Workload, *, sent: Sent | None = None,
                 send: Callable[[], Sent] | None = None):
        if (sent is None) == (send is None):
            raise ValueError("a run is either sent or deferred")
        self.how = how  # batch | each_alone | concurrent | one | hf-peft | hf-dequantized
        self.workload = workload
        self._sent, self._send = sent, send

    @classmethod
    def sent(cls, how: str, workload: Workload, sent: Sent) -> "Run":
        return cls(how, workload, sent=sent)

    @classmethod
    def deferred(cls, how: str, workload: Workload, send: Callable[[], Sent]) -> "Run":
        return cls(how, workload, send=send)

    def __repr__(self) -> str:
        return f"Run({self.how!r}, {self.workload.name!r}, {'sent' if self.done else 'deferred'})"

    @property
    def done(self) -> bool:
        """Sent (or never to be sent: its engine did not start)."""
        return self._sent is not None

    def _resolve(self) -> Sent:
        if self._sent is None:  # a skip (a TP size not hostable here) leaves it deferred for the next reader
            self._sent = self._send()
        return self._sent

    def require(self) -> None:
        """The run happened: its engine started and it was sent (a start-up
        failure is raised with its cause)."""
        self.use.require()

    @property
    def use(self) -> EngineUse:
        return self._resolve().use

    @property
    def observed(self) -> list[dict] | None:
        return self._resolve().observed

    @property
    def labels(self) -> list[str]:
        return self.workload.labels

    @property
    def facts(self) -> dict:
        return self.workload.facts

    @property
    def outcomes(self) -> list[Result]:
        self.require()
        return self._sent.outcomes

    @property
    def engine(self) -> Engine:
        return self.use.require()

    def memory(self) -> SamplerResult | None:
        """The engine's memory from the scenario's start until now."""
        self.require()
        return self.use.memory()

    def follower(self, label: str) -> Follow | None:
        """The comparator's follower for one request of this run: this run's
        stack, forced along given tokens, answering the positions after them."""
        follow = self._resolve().follow
        if follow is None:
            return None

        def forced(tokens: list[int]) -> Result:
            return check_completed([follow(label, tokens)], [f"{label} (followed past a split)"])[0]
        return forced

    def __getitem__(self, key: int | str) -> Result:
        index = self.labels.index(key) if isinstance(key, str) else key
        return self.outcomes[index]


@dataclass(frozen=True)
class Paired:
    """A run and the reference it is judged against (each request alone,
    another stack's answers): what a scenario's pair fixture gives."""
    run: Run
    reference: Run


def _held(value: Any, seen: set[int], depth: int = 0) -> Iterator[Run | EngineUse]:
    """The runs and engine uses inside a value, through containers and
    dataclasses (a Paired, a Soak, a dict of runs), not below a few levels:
    workloads hold media that need no walk."""
    if id(value) in seen or depth > 4:
        return
    seen.add(id(value))
    if isinstance(value, (Run, EngineUse)):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _held(item, seen, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _held(item, seen, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _held(getattr(value, f.name), seen, depth + 1)


def holds_runs(value: Any) -> bool:
    """Whether a value (a fixture's) holds a run, sent or not yet."""
    return next(_held(value, set()), None) is not None


def engine_uses(values: list[Any]) -> list[EngineUse]:
    """The engine uses of the runs inside `values` that were sent (a
    deferred run never sent used no engine), each once."""
    uses: dict[int, EngineUse] = {}
    for found in _held(values, set()):
        use = found if isinstance(found, EngineUse) else found.use if found.done else None
        if use is not None:
            uses.setdefault(id(use), use)
    return list(uses.values())
