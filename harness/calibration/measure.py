"""What a calibration measures of answer pairs that should agree, and the
profile the figures make, or the refusal of figures that are not noise.

Each pair is walked as the comparator walks it (harness.checks.comparators):
position by position; where both sides chose the same token, the distance
of its logprobs; where they split, each side's margin, and then the right
side's own stack is forced along the left side's token (the follower), so
the walk goes on to the end and counts every split of the answer.

A bound is the largest figure measured, doubled (HEADROOM): the largest of a
finite sample underestimates the next one. A split is tolerated where each
side's margin is within twice the largest logprob move measured (each side
moved its logprobs by at most that much, so two tokens that close can swap)
or the widest margin measured at a split, whichever is wider.

Refused, with the figures (the profile written says so, and judges
nothing): on one stack or across TP sizes a split outside the other side's
top-k; more splits than the path's share of the positions; a bound past the
path's ceilings (CEILINGS). Those are a bug or a broken host, and a profile
made of them would excuse the failures the checks are for.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from harness.checks.comparators import Greedy
from harness.checks.noise import logit_grid, logprob_step
from harness.engines.outcomes import Completion, NotForced

HEADROOM = 2.0
TOP_K = 5
# What a calibration may measure before it is refused, per path: the share
# of positions that split, and the ceilings of the bounds it would make.
# One stack (a batch against each request alone, chunked against not)
# reorders sums now and then: a split is a near-tie, and a logprob bound of
# 128 bf16 steps is already a nat at a logprob of -1. TP adds partial sums in
# bfloat16 across ranks. Two stacks (HF against the engine, a 4-bit path
# against its dequantized model) differ by design: more splits, wider
# bounds, and a split whose token the other side did not rank in its top-k
# counts as a split (the comparator never tolerates one, so no profile
# excuses it); on one stack or across TP sizes such a split is no noise.
CEILINGS = {  # path: (split rate, logprob steps, split margin in nats)
    "same-stack": (0.05, 128.0, 2.0), "chunked-vs-unchunked": (0.05, 128.0, 2.0), "tp": (0.05, 256.0, 4.0),
    "long-answers": (0.05, 256.0, 4.0),
    "hf-vs-vllm": (0.15, 512.0, 8.0), "w4a16": (0.15, 512.0, 8.0), "w4a8": (0.15, 512.0, 8.0)}
TWO_STACKS = ("hf-vs-vllm", "w4a16", "w4a8")
# A walk follows at most this many splits of one answer: past it, it is no noise anyway.
MAX_FOLLOWED = 8

Follow = Callable[[list[int]], Greedy]


@dataclass
class Figures:
    """What a set of answer pairs shows."""
    pairs: int = 0
    positions: int = 0          # same-token positions with both logprobs
    max_steps: float = 0.0      # largest |Δ logprob| there, in steps of its size (noise.logprob_step)
    max_delta_nats: float = 0.0  # the same, in nats
    splits: int = 0
    max_split_margin: float = 0.0
    max_splits_per_answer: int = 0
    splits_outside_top_k: int = 0
    unfollowed: int = 0         # splits the right side's stack could not be forced past
    notes: list[str] = field(default_factory=list)

    def add(self, other: "Figures") -> None:
        self.pairs += other.pairs
        self.positions += other.positions
        self.max_steps = max(self.max_steps, other.max_steps)
        self.max_delta_nats = max(self.max_delta_nats, other.max_delta_nats)
        self.splits += other.splits
        self.max_split_margin = max(self.max_split_margin, other.max_split_margin)
        self.max_splits_per_answer = max(self.max_splits_per_answer, other.max_splits_per_answer)
        self.splits_outside_top_k += other.splits_outside_top_k
        self.unfollowed += other.unfollowed
        self.notes += other.notes

    @property
    def split_rate(self) -> float:
        return self.splits / max(1, self.positions + self.splits)

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "notes"}
        out["max_steps"] = round(self.max_steps, 2)
        out["max_delta_nats"] = round(self.max_delta_nats, 5)
        out["max_split_margin"] = round(self.max_split_margin, 4)
        return out


def _lp(logprobs: Sequence[dict[int, float]], pos: int, token: int) -> float | None:
    return logprobs[pos].get(token) if pos < len(logprobs) else None


def walk(left: Greedy, right: Greedy, follow: Follow | None, label: str = "") -> Figures:
    """One pair's figures, the right side followed past each split."""
    figs = Figures(pairs=1)
    a, la = list(left.token_ids), list(left.logprobs)
    b, lb = list(right.token_ids), list(right.logprobs)
    pos = splits = 0
    while pos < min(len(a), len(b)):
        ta, tb = a[pos], b[pos]
        if ta == tb:
            x, y = _lp(la, pos, ta), _lp(lb, pos, tb)
            if x is not None and y is not None:
                figs.positions += 1
                figs.max_delta_nats = max(figs.max_delta_nats, abs(x - y))
                grid = logit_grid(la[pos], lb[pos])
                figs.max_steps = max(figs.max_steps, abs(x - y) / logprob_step(x, grid))
            pos += 1
            continue
        a_in_b, b_in_a = _lp(lb, pos, ta), _lp(la, pos, tb)
        if a_in_b is None or b_in_a is None:
            figs.splits_outside_top_k += 1
            figs.notes.append(f"{label}: split at position {pos} with a token outside the other's top-k")
            break
        splits += 1
        figs.splits += 1
        own_a, own_b = _lp(la, pos, ta), _lp(lb, pos, tb)
        figs.max_split_margin = max(figs.max_split_margin, own_a - b_in_a, own_b - a_in_b)
        if follow is None or splits > MAX_FOLLOWED:
            figs.unfollowed += 1
            break
        try:
            cont = follow(a[:pos + 1])
        except NotForced as e:
            figs.unfollowed += 1
            figs.notes.append(f"{label}: not followed past position {pos}: {e}")
            break
        b, lb = b[:pos] + [ta] + list(cont.token_ids), lb[:pos + 1] + list(cont.logprobs)
        pos += 1
    figs.max_splits_per_answer = splits
    return figs


def measure(pairs: list[tuple[str, object, object, Follow | None]]) -> Figures:
    """Figures over (label, left, right, follow) pairs; answers that are not
    completions are left out, noted."""
    total = Figures()
    for label, left, right, follow in pairs:
        if not (isinstance(left, Completion) and isinstance(right, Completion)):
            total.notes.append(f"{label}: not answered ({type(left).__name__}, {type(right).__name__}): left out")
            continue
        total.add(walk(left, right, follow, label))
    return total


@dataclass(frozen=True)
class Bounds:
    logprob_steps: float
    split_margin_nats: float
    max_splits: int
    top_k: int = TOP_K


class NotNoise(Exception):
    """Figures that are not noise: no profile is made of them."""


def bounds(path: str, figs: Figures) -> Bounds:
    """The profile's bounds from the figures, or NotNoise saying why not."""
    if figs.positions == 0:
        raise NotNoise("no position was compared: nothing was measured")
    rate_limit, steps_ceiling, margin_ceiling = CEILINGS[path]
    refusals = []
    splits = figs.splits + (figs.splits_outside_top_k if path in TWO_STACKS else 0)
    rate = splits / max(1, figs.positions + splits)
    if figs.splits_outside_top_k and path not in TWO_STACKS:
        refusals.append(f"{figs.splits_outside_top_k} split(s) with a token outside the other side's "
                        f"top-{TOP_K}")
    if rate > rate_limit:
        refusals.append(f"splits at {rate:.1%} of the positions, past {rate_limit:.0%}")
    steps = round(HEADROOM * figs.max_steps, 2)
    noisy = figs.max_delta_nats > 0 or figs.splits > 0
    margin = round(HEADROOM * max(figs.max_split_margin, 2 * figs.max_delta_nats), 4) if noisy else 0.0
    if steps > steps_ceiling:
        refusals.append(f"a logprob bound of {steps} steps, past the ceiling of {steps_ceiling:g}")
    if margin > margin_ceiling:
        refusals.append(f"a split margin of {margin} nats, past the ceiling of {margin_ceiling:g}")
    if refusals:
        raise NotNoise("; ".join(refusals))
    max_splits = max(int(HEADROOM * figs.max_splits_per_answer), 1 if margin > 0 else 0)
    return Bounds(steps, margin, max_splits)
