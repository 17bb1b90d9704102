"""The premise of a cache-matrix cell, observed: the engine ran the cell's
settings. A repeat took cached prompt tokens where prefix caching is on and
none where it is off; the front end looked media items up in its processor
cache where that is on (a repeat hit it, with one API server) and never
where it is off. Without this, a cell whose setting silently did not take
would pass as the setting it claims."""
from __future__ import annotations

from harness.verdicts import Cause, CheckFailure
from harness.engines.outcomes import Result


def _cached(result: Result) -> int:
    return getattr(result, "cached_tokens", None) or 0


def check_cell_caches(cell, labels: list[str], rounds: list[tuple[list[Result], list[dict] | None]],
                      media_items: int) -> dict:
    """`rounds`: each sequential round's outcomes and what the engine
    observed meanwhile (None: not observable), the last round repeating the
    first. `media_items`: media items per round. Returns the evidence."""
    repeat = rounds[-1][0]
    evidence = {"cell": cell.to_dict(), "cached_tokens": {
        f"round {r + 1}": dict(zip(labels, map(_cached, outcomes))) for r, (outcomes, _) in enumerate(rounds)}}
    took = {f"{label} (round {r + 1})": _cached(result) for r, (outcomes, _) in enumerate(rounds)
            for label, result in zip(labels, outcomes) if _cached(result)}
    if not cell.prefix and took:
        raise CheckFailure(Cause.PREMISE, f"prefix caching is off in this cell, but requests took cached "
                           f"prompt tokens {took}: the engine did not run the cell's setting", evidence=evidence)
    missed = [label for label, result in zip(labels, repeat) if not _cached(result)]
    if cell.prefix and missed:
        raise CheckFailure(Cause.PREMISE, f"prefix caching is on in this cell, but the repeats of {missed} took "
                           f"no cached prompt tokens: the cache this cell judges was not used", evidence=evidence)
    if any(observed is None for _, observed in rounds):
        evidence["processor_cache"] = "not observed (no in-engine observer)"
        return evidence
    lookups = [[e for e in observed if e.get("event") == "mm_cache"] for _, observed in rounds]
    hits = sum(1 for e in lookups[-1] if e.get("hit"))
    evidence["processor_cache"] = {"lookups": sum(map(len, lookups)), "repeat_hits": hits,
                                   "media_items_per_round": media_items,
                                   "front_ends": sorted({e.get("pid") for found in lookups for e in found})}
    if cell.processor == "off" and any(lookups):
        raise CheckFailure(Cause.PREMISE, f"the processor cache is off in this cell, but the front end looked "
                           f"{sum(map(len, lookups))} media items up in it", evidence=evidence)
    if cell.processor != "off" and not any(lookups):
        raise CheckFailure(Cause.PREMISE, f"the processor cache ({cell.processor}) is on in this cell, but the "
                           f"front end looked no media item up in it", evidence=evidence)
    # Two API servers keep a cache each: a repeat may reach the one that has not seen it.
    if cell.processor != "off" and cell.api_servers == 1 and hits < media_items:
        raise CheckFailure(Cause.PREMISE, f"the processor cache served {hits} of the repeat's {media_items} media "
                           f"items: the cache this cell judges was not used", evidence=evidence)
    return evidence
