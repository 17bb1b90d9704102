"""The engines a scenario module needs, declared once at its top as
`ENGINES`, in the order its checks first use them:

    ENGINES = (
        Engine("offline", used_by=("batch",)),
        Engine("reference", used_by=("batch", "load")),
        Engine("server", used_by=("load", "test_edge_input")),
    )

- `kind`: "offline" (runner.batch), "server" (concurrent, one, rounds,
  abandoning, soak) or "reference" (each_alone: caches off).
- `used_by`: the module's fixtures and test functions whose checks use it;
  the engine is needed while a check still to run asks for one of them.
- `args`: its engine arguments over the family's: None (the family's
  own), SAME (the call's of the engine whose opening starts it ahead: a
  reference of the engine under test), or a function of the runner and a
  check's parameters (one engine per value, a cache cell's or a TP size's).
- `ahead`: False where a start beside the module's checks would take time
  they measure (the fuzzer's budget): it starts when first used.

The scheduler (harness.schedule) reads them; a scenario never starts an
engine itself, nor reads which checks come later.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

KINDS = ("offline", "server", "reference")


class SameArgs:
    """The call's arguments of the engine being opened (see `args`)."""

    def __repr__(self) -> str:
        return "SAME"


SAME = SameArgs()


@dataclass(frozen=True)
class Engine:
    kind: str
    used_by: tuple[str, ...]
    args: None | SameArgs | Callable[[Any, dict], dict | None] = None
    ahead: bool = True

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"engine kind {self.kind!r} is none of {', '.join(KINDS)}")
        if isinstance(self.used_by, str) or not self.used_by or not all(isinstance(u, str) for u in self.used_by):
            raise ValueError(f"used_by names the fixtures and tests that use the engine: got {self.used_by!r}")
        if not (self.args is None or self.args is SAME or callable(self.args)):
            raise ValueError(f"args is None, SAME or a function of (runner, params): got {self.args!r}")


def module_engines(module) -> tuple[Engine, ...]:
    """A scenario module's `ENGINES` (none declared: nothing starts ahead)."""
    declared = getattr(module, "ENGINES", ())
    if not all(isinstance(e, Engine) for e in declared):
        raise TypeError(f"{getattr(module, '__name__', module)}.ENGINES holds what is not an Engine: {declared!r}")
    return tuple(declared)
