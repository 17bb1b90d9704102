"""What an engine's encoder made of the memory it was told it had, read from
its observed events (harness/compat/site/mmharness_memory.py), and the
checks on it.

One encoder call (an `encoder` event) holds one or more chunk decisions:
the memory query's answer (`memory_info`), the chunk function's call with its
arguments and answer (`encoder_chunk`), then the vision-tower passes made
with it (`vision_chunk`: items, and the transient they took).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.verdicts import Cause, CheckFailure, DetailedCause
from harness.units import MiB


@dataclass
class Decision:
    modality: str
    free: int | None = None  # the memory query's answer
    total: int | None = None
    emulated: bool = False
    arguments: dict | None = None  # the chunk function's, as the call site passed them
    answer: int | None = None
    forced: int | None = None
    passes: list[dict] = field(default_factory=list)  # vision_chunk events

    @property
    def items(self) -> int:
        return sum(p["items"] for p in self.passes)

    @property
    def chunk_sizes(self) -> list[int]:
        return [p["items"] for p in self.passes]

    def describe(self) -> str:
        query = (f"free {self.free / MiB:.1f} MiB, total {self.total / MiB:.1f} MiB"
                 + (" (emulated)" if self.emulated else "") if self.free is not None
                 else "no memory query")
        forced = "all" if self.forced and self.forced >= self.items else self.forced
        chosen = (f"forced chunks of {forced} (the function said {self.answer})" if self.forced
                  else f"chunks of {max(self.chunk_sizes, default=0)}")
        return f"{self.modality}: {query} -> {chosen} for {self.items} items {self.chunk_sizes}"


def decisions(events: list[dict]) -> list[Decision]:
    """Chunk decisions in the order each engine process made them."""
    found: list[Decision] = []
    for pid in dict.fromkeys(e.get("pid") for e in events):
        current: Decision | None = None
        modality = ""
        for e in (e for e in events if e.get("pid") == pid):
            kind = e.get("event")
            if kind == "encoder":
                modality, current = e.get("modality", ""), None
            elif kind == "memory_info" or (kind in ("encoder_chunk", "vision_chunk") and current is None):
                current = Decision(e.get("modality", modality))
                found.append(current)
            if kind == "memory_info":
                current.free, current.total, current.emulated = e["free"], e["total"], e["emulated"]
            elif kind == "encoder_chunk":
                current.arguments, current.answer, current.forced = e["arguments"], e["answer"], e.get("forced")
            elif kind == "vision_chunk":
                current.passes.append(e)
    return found


def summary(events: list[dict]) -> list[str]:
    """One line per decision: free X, total Y -> chunks of k for n items."""
    return [d.describe() for d in decisions(events)]


def _require(found: list[Decision], what: str) -> None:
    if not any(d.passes for d in found):
        raise CheckFailure(Cause.PREMISE, f"no vision-tower pass was observed in {what}: "
                           "the encoder never ran (a cache served it?) or is not observable")


def check_chunked(events: list[dict], what: str) -> None:
    """The premise of the low-memory runs: the encoder went through some
    batch of items in more than one pass."""
    found = decisions(events)
    _require(found, what)
    if not any(len(d.passes) > 1 for d in found):
        raise CheckFailure(Cause.PREMISE, f"the encoder never chunked in {what}: every batch went "
                           f"through in one pass {[d.describe() for d in found]}")


def check_forced_chunk(events: list[dict], chunk: int, what: str) -> None:
    """Every pass held `chunk` items, but a batch's last, which holds the
    rest: the forced size really reached the encoder."""
    found = decisions(events)
    _require(found, what)
    for d in found:
        if d.forced is None:
            raise CheckFailure(Cause.PREMISE, f"{what}: the chunk size could not be forced, no chunk "
                               f"function was called: {d.describe()}")
        sizes = d.chunk_sizes
        if any(s != min(chunk, d.items) for s in sizes[:-1]) or (sizes and sizes[-1] > chunk):
            raise CheckFailure(Cause.PREMISE, f"{what}: forced chunks of {chunk}, the encoder made "
                               f"passes of {sizes}")


def check_chunk_from_free(events: list[dict], what: str) -> None:
    """The call site hands the chunk function the free memory its query
    answered, not the total (vLLM PR 43296's bug)."""
    found = [d for d in decisions(events) if d.arguments is not None]
    if not found:
        raise CheckFailure(Cause.PREMISE, f"{what}: no call of the chunk function was observed")
    for d in found:
        passed = d.arguments.get("free_bytes")
        if d.free is None:
            raise CheckFailure(Cause.PREMISE, f"{what}: the chunk function was called with no memory "
                               f"query before it: {d.describe()}")
        if passed != d.free:
            said = "the total" if passed == d.total else f"{passed / MiB:.1f} MiB"
            raise CheckFailure(
                DetailedCause(Cause.OVER_BUDGET, f"chunk sized from {'total' if passed == d.total else 'another'} "
                                                 "memory, not free"),
                f"{what}: the encoder passed {said} ({passed} B) to its chunk function as free memory; "
                f"its memory query answered free {d.free} B of {d.total} B",
                evidence={"decision": d.describe(), "arguments": d.arguments})


def largest_chunk(events: list[dict], modality: str) -> int:
    return max((max(d.chunk_sizes, default=0) for d in decisions(events) if d.modality == modality),
               default=0)


def check_shrinks(ample: list[dict], low: list[dict], what: str) -> dict:
    """With free memory far below the total, every modality's chunks are
    smaller than with the card's usual free memory (where those hold more
    than one item): the chunk follows free memory."""
    sizes = {}
    for modality in dict.fromkeys(d.modality for d in decisions(ample)):
        big, small = largest_chunk(ample, modality), largest_chunk(low, modality)
        sizes[modality] = {"usual": big, "low_free": small}
        if big > 1 and not small < big:
            raise CheckFailure(
                DetailedCause(Cause.OVER_BUDGET, "chunk did not shrink with free memory"),
                f"{what}: {modality} chunks of {small} with free memory far below the total, "
                f"{big} with the card's usual free memory", evidence={"chunks": sizes})
    if not any(v["usual"] > 1 for v in sizes.values()):
        raise CheckFailure(Cause.PREMISE, f"{what}: no chunk held more than one item with the card's "
                           f"usual free memory, so none could shrink: {sizes}")
    return sizes


def stated_budget(free: int, total: int) -> int:
    """The budget vLLM's Gemma4 encoder states for one chunk's transient
    (gemma4_mm.py: "Half of currently-free, capped at 10% of total")."""
    return min(free // 2, total // 10)


def transients(events: list[dict]) -> list[dict]:
    """Each pass's measured transient beside the budget its decision stated."""
    rows = []
    for d in decisions(events):
        for p in d.passes:
            rows.append({"modality": d.modality, "items": p["items"], "patches": p["patches"],
                         "transient_bytes": p["transient_bytes"], "measured_by": p["measured_by"],
                         "budget_bytes": stated_budget(d.free, d.total) if d.free is not None else None})
    return rows


def check_transient_within_budget(rows: list[dict], what: str) -> None:
    """Each pass measured by the device allocator took no more than the
    budget stated for it: the chunk size the engine chose keeps its
    promise, judged by measurement rather than by its own cost formula."""
    if not rows:
        raise CheckFailure(Cause.PREMISE, f"{what}: no vision-tower pass was measured")
    over = [r for r in rows if r["measured_by"] == "cuda-allocator-peak" and r["budget_bytes"] is not None
            and r["transient_bytes"] > r["budget_bytes"]]
    if over:
        r = over[0]
        raise CheckFailure(
            Cause.OVER_BUDGET,
            f"{what}: a {r['modality']} pass of {r['items']} items took {r['transient_bytes'] / MiB:.1f} MiB, "
            f"over the {r['budget_bytes'] / MiB:.1f} MiB budget stated for it ({len(over)} passes over)",
            evidence={"over": over[:10]})


def check_passes_within_stated_chunk(events: list[dict], free: int, total: int, chunk_for, what: str) -> dict:
    """Every vision pass holds no more items than `chunk_for(patches per
    item, free, total)` (the engine's own chunk function) allows on this
    card: where the engine skips its chunking (Gemma4 under tower LoRA),
    its low-free-memory protection is off, and this says by how much."""
    found = decisions(events)
    _require(found, what)
    rows = [{"items": p["items"], "patches": p["patches"], "allowed": chunk_for(p["patches"], free, total)}
            for d in found for p in d.passes]
    evidence = {"passes": rows, "chunk_decisions": [d.describe() for d in found],
                "memory_queries": sum(1 for d in found if d.free is not None)}
    over = [r for r in rows if r["items"] > max(1, r["allowed"])]
    if over:
        r = over[0]
        raise CheckFailure(
            DetailedCause(Cause.OVER_BUDGET, "encoder pass over the chunk stated for free memory"),
            f"{what}: a vision pass held {r['items']} items of {r['patches']} patches; the engine's own "
            f"chunk function allows {r['allowed']} with free {free / MiB:.1f} MiB of {total / MiB:.1f} MiB "
            f"({len(over)} of {len(rows)} passes over; {evidence['memory_queries']} memory queries asked)",
            evidence=evidence)
    return evidence
