"""What one run of a workload left: its outcomes, and the engine use
(engine, log window, memory window) they came from.

A run whose engine never started still exists: reading its outcomes raises
the start-up failure, so every check that needs the engine fails with the
engine's cause, and checks that need only the workload still run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from harness.checks.comparators import Follow
from harness.checks.requests import check_completed
from harness.checks.verdicts import CheckFailure
from harness.engines.base import Engine, LogWindow
from harness.engines.outcomes import Result
from harness.memory.samplers import SamplerResult
from harness.memory.watch import MemoryWatch
from harness.models import ModelEntry
from harness.workloads.request import Workload


@dataclass(eq=False)
class EngineUse:
    """One scenario's use of a (possibly shared) engine."""
    kind: str
    scenario: str
    entry: ModelEntry
    engine: Engine | None = None
    failure: CheckFailure | None = None  # the engine never became ready
    window: LogWindow | None = None
    watch: MemoryWatch | None = None
    t0: float = 0.0  # the sampler's clock when the scenario began
    args: dict = field(default_factory=dict)  # the engine's arguments, as the runner gave them
    version: str | None = None  # the engine's version, known from its interpreter even if it never started

    def require(self) -> Engine:
        if self.failure:
            raise self.failure
        return self.engine

    def memory(self) -> SamplerResult | None:
        """Memory from the scenario's start until now."""
        return self.watch.window(self.t0) if self.watch else None


@dataclass(eq=False)
class Run:
    """A workload run one way. A run made with `go` is lazy: it starts its
    engine and sends its requests when first read, so checks that never
    read it (a premise check, say) cost no engine start."""
    how: str  # batch | each_alone | concurrent | one
    workload: Workload
    _use: EngineUse | None = field(default=None, repr=False)
    _outcomes: list[Result] = field(default_factory=list, repr=False)
    # What the engine's own processes recorded while this run went (steps,
    # encoder calls; harness.engines.observations); None: not observable.
    _observed: list[dict] | None = field(default=None, repr=False)
    _go: Callable[["Run"], None] | None = field(default=None, repr=False)
    # (label, forced tokens) -> that request's answer continuing them, on the
    # stack that made this run; None where the stack takes no forced tokens.
    _follow: Callable[[str, list[int]], Result] | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        """Sent (or never to be sent: its engine did not start)."""
        return self._go is None

    def _resolve(self) -> None:
        if self._go is not None:
            go, self._go = self._go, None
            try:
                go(self)
            except BaseException:  # a skip (a TP size not hostable here): the next reader meets it too
                self._go = go
                raise

    @property
    def use(self) -> EngineUse:
        self._resolve()
        return self._use

    @property
    def observed(self) -> list[dict] | None:
        self._resolve()
        return self._observed

    @property
    def labels(self) -> list[str]:
        return self.workload.labels

    @property
    def facts(self) -> dict:
        return self.workload.facts

    @property
    def outcomes(self) -> list[Result]:
        self.use.require()
        return self._outcomes

    @property
    def engine(self) -> Engine:
        return self.use.require()

    def memory(self) -> SamplerResult | None:
        """The engine's memory from the scenario's start until now."""
        self.use.require()
        return self.use.memory()

    def follower(self, label: str) -> Follow | None:
        """The comparator's follower for one request of this run: this run's
        stack, forced along given tokens, answering the positions after them."""
        self._resolve()
        if self._follow is None:
            return None

        def follow(tokens: list[int]) -> Result:
            return check_completed([self._follow(label, tokens)], [f"{label} (followed past a split)"])[0]
        return follow

    def __getitem__(self, key: int | str) -> Result:
        index = self.labels.index(key) if isinstance(key, str) else key
        return self.outcomes[index]


@dataclass(frozen=True)
class Paired:
    """A run and the reference it is judged against (each request alone,
    another stack's answers): what a scenario's pair fixture gives."""
    run: Run
    reference: Run
