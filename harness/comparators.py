"""One comparator for greedy outputs, in the style of vLLM's check_logprobs_close.

Two greedy runs may split at a near-tie (bfloat16 on CPU is noisy). Tokens
are compared position by position; at the first mismatch each side's token
must be in the other side's top-k, and within `near_tie_nats` of that side's
chosen token. After a tolerated split the sequences legitimately differ, so
comparison stops there. The verdict carries its evidence either way.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, Sequence

TOP_K = 5
NEAR_TIE_NATS = 1.0


class Greedy(Protocol):
    token_ids: Sequence[int]
    logprobs: Sequence[dict[int, float]]


@dataclass(frozen=True)
class Divergence:
    position: int
    left_token: int
    right_token: int
    # The other side's logprob of this side's token (None: not in its top-k).
    left_token_in_right: float | None
    right_token_in_left: float | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    identical: bool
    message: str
    divergence: Divergence | None = None


def _lp(logprobs: Sequence[dict[int, float]], pos: int, token: int) -> float | None:
    if pos >= len(logprobs):
        return None
    return logprobs[pos].get(token)


def compare_greedy(left: Greedy, right: Greedy, *, labels: tuple[str, str] = ("left", "right"),
                   top_k: int = TOP_K, near_tie_nats: float = NEAR_TIE_NATS) -> Comparison:
    a, b = list(left.token_ids), list(right.token_ids)
    la, lb = labels
    if not a or not b:
        return Comparison(False, False, f"empty output: {la} has {len(a)} tokens, {lb} has {len(b)}")
    for pos, (ta, tb) in enumerate(zip(a, b)):
        if ta == tb:
            continue
        # The other side's view: its logprob for this side's token, from its top-k.
        a_in_b, b_in_a = _lp(right.logprobs, pos, ta), _lp(left.logprobs, pos, tb)
        d = Divergence(pos, ta, tb, a_in_b, b_in_a)
        if a_in_b is None or b_in_a is None:
            return Comparison(False, False,
                              f"diverged at position {pos}: {la} token {ta}, {lb} token {tb}; "
                              f"{'neither' if a_in_b is None and b_in_a is None else 'one'} "
                              f"is in the other's top-{top_k}", d)
        # Each side's margin between its own choice and the other side's token.
        own_a, own_b = _lp(left.logprobs, pos, ta), _lp(right.logprobs, pos, tb)
        gaps = [own - other for own, other in ((own_a, b_in_a), (own_b, a_in_b)) if own is not None]
        if any(g > near_tie_nats for g in gaps):
            return Comparison(False, False,
                              f"diverged at position {pos}: {la} token {ta}, {lb} token {tb}; "
                              f"not a near-tie (gap {max(gaps):.3f} nats > {near_tie_nats})", d)
        return Comparison(True, False, f"near-tie split at position {pos}: {la} token {ta}, "
                                       f"{lb} token {tb}, both in each other's top-{top_k}", d)
    if len(a) != len(b):
        return Comparison(True, False, f"same tokens over the shorter output "
                                       f"({la} {len(a)}, {lb} {len(b)} tokens)")
    return Comparison(True, True, f"identical {len(a)} tokens")
