"""One comparator for greedy outputs, with its tolerances from a measured
noise profile (harness/checks/noise.py), in the manner of vLLM's
check_logprobs_close.

Tokens are compared position by position. Where both sides chose the same
token, its logprobs must agree within the profile's bound (equal, where the
profile measured no noise). Where they chose different tokens (a split):
- a profile that measured no split between runs (the CPU tier on one stack)
  forgives none: the answers differ;
- otherwise the split is tolerated only when each token is in the other
  side's top-k and each side's margin (its own token's logprob minus the
  other's token's) is within what the profile measured, and the answer has
  split no more often than the profile allows (`splits_allowed`: its
  `max_splits`, or its split rate over a longer answer). The comparison then
  goes on: `follow` forces the right side's stack along the left side's
  tokens through the split and answers the rest, and the left side's
  continuation is held to that, split by split. Without a follower the
  positions after a tolerated split are unscored, and the verdict says so.
Outputs of different lengths, or that stopped for different reasons, never
match. The verdict carries its evidence either way.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Protocol, Sequence

from harness.checks.noise import NoiseProfile, logit_grid
from harness.engines.outcomes import NotForced


class Greedy(Protocol):
    token_ids: Sequence[int]
    logprobs: Sequence[dict[int, float]]
    finish_reason: str | None


# The right side's stack, forced along these tokens (the left side's, through
# a split), answering the positions after them.
Follow = Callable[[list[int]], Greedy]


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
class Split:
    """A tolerated split: where, which tokens, and each side's margin."""
    position: int
    left_token: int
    right_token: int
    left_margin: float | None
    right_margin: float | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    ok: bool
    identical: bool
    message: str
    divergence: Divergence | None = None
    splits: tuple[Split, ...] = ()
    # A tolerated split with no follower: the positions after it were not compared.
    unscored_after: int | None = None
    profile: str = ""

    def to_dict(self) -> dict:
        return {"ok": self.ok, "identical": self.identical, "message": self.message, "profile": self.profile,
                "splits": [s.to_dict() for s in self.splits], "unscored_after": self.unscored_after}


def _lp(logprobs: Sequence[dict[int, float]], pos: int, token: int) -> float | None:
    if pos >= len(logprobs):
        return None
    return logprobs[pos].get(token)


def _grid(a: Sequence[dict[int, float]], b: Sequence[dict[int, float]], pos: int) -> float | None:
    return logit_grid(*(side[pos] for side in (a, b) if pos < len(side)))


def compare_greedy(left: Greedy, right: Greedy, profile: NoiseProfile, *,
                   labels: tuple[str, str] = ("left", "right"), follow: Follow | None = None) -> Comparison:
    la, lb = labels
    a = list(left.token_ids)
    b, b_logprobs, b_finish = list(right.token_ids), list(right.logprobs), getattr(right, "finish_reason", None)

    def result(ok: bool, message: str, divergence: Divergence | None = None, **kw) -> Comparison:
        return Comparison(ok, ok and not splits, message, divergence, tuple(splits), profile=profile.name, **kw)

    splits: list[Split] = []
    first: Divergence | None = None
    if not a or not b:
        return result(False, f"empty output: {la} has {len(a)} tokens, {lb} has {len(b)}")
    pos = 0
    while pos < min(len(a), len(b)):
        ta, tb = a[pos], b[pos]
        if ta == tb:
            x, y = _lp(left.logprobs, pos, ta), _lp(b_logprobs, pos, tb)
            # The grid only where the logprobs differ: most positions of most answers are equal.
            grid = _grid(left.logprobs, b_logprobs, pos) if x is not None and y is not None and x != y else None
            if x is not None and y is not None and abs(x - y) > profile.logprob_tolerance(x, grid):
                allows = ("measured no noise: they must be equal" if profile.logprob_steps == 0 else
                          f"allows {profile.logprob_tolerance(x, grid):.4f} nats")
                return result(False, f"same token {ta} at position {pos}, but its logprob is {x:.6g} in {la} "
                                     f"and {y:.6g} in {lb} (profile {profile.name} {allows}){_after(splits)}", first)
            pos += 1
            continue
        a_in_b, b_in_a = _lp(b_logprobs, pos, ta), _lp(left.logprobs, pos, tb)
        divergence = Divergence(pos, ta, tb, a_in_b, b_in_a)
        first = first or divergence
        head = f"diverged at position {pos}: {la} token {ta}, {lb} token {tb}"
        if profile.split_margin_nats == 0:
            return result(False, f"{head}; profile {profile.name} measured no split between runs, so a "
                                 f"split is a difference{_after(splits)}", first)
        if a_in_b is None or b_in_a is None:
            return result(False, f"{head}; {'neither' if a_in_b is None and b_in_a is None else 'one'} is "
                                 f"in the other's top-{profile.top_k}{_after(splits)}", first)
        own_a, own_b = _lp(left.logprobs, pos, ta), _lp(b_logprobs, pos, tb)
        margins = (None if own_a is None else own_a - b_in_a, None if own_b is None else own_b - a_in_b)
        wide = [m for m in margins if m is not None and m > profile.split_margin_nats]
        if wide:
            return result(False, f"{head}; a margin of {max(wide):.3f} nats, beyond the "
                                 f"{profile.split_margin_nats} nats profile {profile.name} measured at a split"
                                 f"{_after(splits)}", first)
        splits.append(Split(pos, ta, tb, *margins))
        allowed = profile.splits_allowed(len(a))
        if len(splits) > allowed:
            return result(False, f"{head}; {len(splits)} splits in one answer of {len(a)} tokens: more than "
                                 f"noise (profile {profile.name} allows {allowed})", first)
        if follow is None:
            return result(True, f"{head}, a split within profile {profile.name}; positions after it "
                                f"unscored (no follower for {lb}'s stack)", first, unscored_after=pos)
        try:
            cont = follow(a[:pos + 1])
        except NotForced as e:
            return result(True, f"{head}, a split within profile {profile.name}; positions after it unscored "
                                f"({lb}'s stack could not be forced along {la}'s tokens: {e})", first,
                          unscored_after=pos)
        b = b[:pos] + [ta] + list(cont.token_ids)
        b_logprobs = b_logprobs[:pos + 1] + list(cont.logprobs)
        b_finish = getattr(cont, "finish_reason", None)
        pos += 1
    if len(a) != len(b):
        return result(False, f"lengths differ: {la} {len(a)} tokens, {lb} {len(b)}, the same over the first "
                             f"{min(len(a), len(b))}{_after(splits)}", first)
    ra = getattr(left, "finish_reason", None)
    if ra != b_finish:
        return result(False, f"the same {len(a)} tokens, but {la} stopped for {ra!r} and {lb} for "
                             f"{b_finish!r}{_after(splits)}", first)
    if splits:
        return result(True, f"{len(a)} tokens held to {lb}'s stack past {len(splits)} split(s) within profile "
                            f"{profile.name} (at positions {[s.position for s in splits]})", first)
    return result(True, f"identical {len(a)} tokens" + ("" if profile.exact else f" within profile {profile.name}"))


def _after(splits: list[Split]) -> str:
    return f" (after following past splits at {[s.position for s in splits]})" if splits else ""
