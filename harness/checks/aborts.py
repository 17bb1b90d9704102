"""Aborts and preemption, over what the scheduler observed (the `held`,
`preempted`, `aborted` and `finished` events of the in-engine observer).

Premises: a run meant to preempt did (each preempted request was resumed
and finished); clients that went away had their requests aborted, and no
other. The memory check: once the scheduler is idle, every KV block is
back in the pool and every encoder-cache slot can be freed again; blocks
or slots still held by finished requests are a `leak`."""
from __future__ import annotations

from harness.verdicts import Cause, CheckFailure


NAMES = {"kv_blocks": "KV block(s)", "encoder_cache_slots": "encoder-cache slot(s)"}


def _events(observed: list[dict], name: str) -> list[dict]:
    return [e for e in observed if e.get("event") == name]


def check_preempted(observed: list[dict]) -> dict:
    """The scheduler preempted at least one request, and resumed and
    finished each one it preempted. Returns the evidence."""
    preempted = _events(observed, "preempted")
    finished = {r for e in _events(observed, "finished") for r in e.get("requests", [])}
    ids = sorted({e.get("request") for e in preempted})
    evidence = {"preemptions": [{k: e.get(k) for k in ("request", "computed", "output_tokens")} for e in preempted],
                "least_free_blocks": min((e.get("free_blocks") for e in _events(observed, "held")), default=None)}
    if not preempted:
        raise CheckFailure(Cause.PREMISE, f"no request was preempted (fewest free KV blocks seen: "
                           f"{evidence['least_free_blocks']}): the KV cache was not short, so this run "
                           f"judges no resumed request", evidence=evidence)
    unfinished = [r for r in ids if r not in finished]
    if unfinished:
        raise CheckFailure(Cause.PREMISE, f"preempted requests {unfinished} were never seen to finish",
                           evidence=evidence)
    return evidence


def none_aborted_holding_blocks(observed: list[dict]) -> bool:
    """No request was aborted while it held KV blocks: every client that
    went away left after the engine had finished its request."""
    return not any(n for e in _events(observed, "aborted") for n in (e.get("held_blocks") or {}).values())


def check_aborted(observed: list[dict], abandoned: int) -> dict:
    """Clients that went away had their requests aborted: no more requests
    than clients went away, and at least one while it held KV blocks (what
    the memory check then sees given back). A client that leaves after the
    engine has finished its request aborts nothing: the evidence counts
    those, and only a run where none of them aborted fails."""
    events = _events(observed, "aborted")
    aborted = sorted({r for e in events for r in e.get("requests", [])})
    held = {r: n for e in events for r, n in (e.get("held_blocks") or {}).items()}
    evidence = {"clients_gone": abandoned, "aborted": aborted, "held_blocks": held,
                "left_after_the_end": max(0, abandoned - len(aborted))}
    if len(aborted) > abandoned:
        raise CheckFailure(Cause.PREMISE, f"{abandoned} client(s) went away mid-stream, and the scheduler aborted "
                           f"{len(aborted)} request(s): {aborted}", evidence=evidence)
    if not any(held.get(r) for r in aborted):
        raise CheckFailure(Cause.PREMISE, f"{abandoned} client(s) went away mid-stream, and the scheduler aborted "
                           f"{len(aborted)} request(s) holding KV blocks ({held or 'none aborted'}): no abort "
                           f"for the memory check to judge", evidence=evidence)
    return evidence


def check_freed(observed: list[dict]) -> dict:
    """Once idle, the requests hold nothing: every KV block free, every
    encoder-cache slot freeable."""
    held = _events(observed, "held")
    last = held[-1] if held else None
    evidence = {"held_at_end": last}
    if last is None or last.get("running") or last.get("waiting"):
        raise CheckFailure(Cause.PREMISE, f"the scheduler was not seen idle after the run (last seen: {last}), "
                           f"so what the finished requests hold cannot be told", evidence=evidence)
    kept = {}
    if last["free_blocks"] < last["blocks"]:
        kept["kv_blocks"] = last["blocks"] - last["free_blocks"]
    slots, free = last.get("encoder_slots"), last.get("encoder_free")
    if slots is not None and free is not None and free < slots:
        kept["encoder_cache_slots"] = slots - free
    if kept:
        evidence["held_by_finished_requests"] = kept
        raise CheckFailure(Cause.LEAK, "with no request running or waiting, the scheduler still holds "
                           + ", ".join(f"{n} {NAMES[what]}" for what, n in kept.items())
                           + f" (of {last['blocks']} KV blocks, {slots} encoder-cache slots)", evidence=evidence)
    return evidence
