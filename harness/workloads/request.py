"""What a scenario sends: labelled requests, grouped into a named workload.

The same shape for every modality, so the runner and the checks never care
whether a request carries audio, images or video.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    label: str
    conversation: list[dict]
    # What a reader of the report should know of this input (duration, frames...).
    facts: dict = field(default_factory=dict)
    # The media it was made from (a Clip, say), for premise guards; never recorded.
    source: object = field(default=None, repr=False, compare=False)
    # The LoRA adapter it runs under (harness.engines.base.LoraAdapter); None: the base model.
    adapter: object = None


@dataclass(frozen=True)
class Workload:
    """Requests sent together. `name` tells this workload's scenario apart
    from the family's others (ragged, equal, load-normal, edge)."""
    name: str
    requests: tuple[Request, ...]
    facts: dict = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.requests]

    @property
    def adapters(self) -> list | None:
        """One adapter (or None) per request; None when no request has one,
        so a workload without LoRA is sent as it always was."""
        adapters = [r.adapter for r in self.requests]
        return adapters if any(adapters) else None

    def only(self, *labels: str) -> "Workload":
        """The same workload reduced to these requests (for references)."""
        return Workload(self.name, tuple(r for r in self.requests if r.label in labels), self.facts)
