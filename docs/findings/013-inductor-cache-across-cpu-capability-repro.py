#!/usr/bin/env python3
"""torch inductor's CPU kernel cache, shared across ATEN_CPU_CAPABILITY:
vLLM's vocabulary-parallel masking function (`get_masked_input_and_mask`,
compiled as vLLM compiles it: dynamic shapes, inductor), compiled once
natively, then run from the same cache with ATEN_CPU_CAPABILITY=avx2,
against eager. Standard library and torch only.

    python repro.py            # exit 1 and "REPRODUCED" where the second run differs
    python repro.py --child    # one run in this process: exit 1 where compiled != eager

Needs a CPU with AVX-512 (the native compile must pick another ISA than avx2).
"""
import os
import subprocess
import sys
import tempfile

LENGTHS = (17, 131, 300)
# Rank 0's and rank 1's shards of a 2048-token vocabulary at TP 2, no added tokens.
SHARDS = ((0, 1024, 0, 2048, 2048), (1024, 2048, 0, 2048, 2048))


def masked(input_, start: int, end: int, padding: int, added_start: int, added_end: int):
    org_mask = (input_ >= start) & (input_ < end)
    added_mask = (input_ >= added_start) & (input_ < added_end)
    added_offset = added_start - (end - start) - padding
    valid_offset = (start * org_mask) + (added_offset * added_mask)
    vocab_mask = org_mask | added_mask
    return vocab_mask * (input_ - valid_offset), ~vocab_mask


def child() -> int:
    import torch

    compiled = torch.compile(masked, dynamic=True, backend="inductor")
    differs = 0
    for n in LENGTHS:
        ids = torch.randint(0, 2048, (n,), generator=torch.Generator().manual_seed(n), dtype=torch.int64)
        for shard in SHARDS:
            got, want = compiled(ids, *shard), masked(ids, *shard)
            if not (torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])):
                differs += 1
                print(f"differs: {n} ids, shard {shard}: largest id {int(got[0].max())}, eager's {int(want[0].max())}")
    print(f"{differs} of {len(LENGTHS) * len(SHARDS)} calls differ from eager")
    return 1 if differs else 0


def main() -> int:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        env.pop("ATEN_CPU_CAPABILITY", None)
        first = subprocess.run([sys.executable, __file__, "--child"], env=env)
        if first.returncode:
            print("the native run already differs from eager: not this bug")
            return 2
        second = subprocess.run([sys.executable, __file__, "--child"], env={**env, "ATEN_CPU_CAPABILITY": "avx2"})
    if second.returncode:
        print("REPRODUCED: with ATEN_CPU_CAPABILITY=avx2, the kernels the native run cached give wrong ids")
        return 1
    print("not reproduced: the avx2 run from the native run's cache equals eager")
    return 0


if __name__ == "__main__":
    sys.exit(child() if "--child" in sys.argv else main())
