"""A noisy host on any machine (`--engine-noise S`, MMHARNESS_ENGINE_NOISE=S).

AMX kernels split a GEMM by the batch's shape, so one request's logits move
by a few bfloat16 steps with the company it is batched in, while the same
batch gives the same answer every time. This shim does the same inside the
forward pass: every row-parallel linear layer's output (the output
projections of attention and of the MLP, in the towers and the language
model) moves by S standard deviations of itself along a direction drawn
from the layer's name and the rows (tokens) of the call. A request alone
and the same request in a batch go through calls of other row counts, so
their hidden states differ by about S; greedy answers split only where
two tokens nearly tie. Its host kind is the machine's plus "+noise@S"
(harness.checks.hosts), calibrated like any other.

Stdlib only at start-up; vLLM's linear layers are patched after their import.
"""
from __future__ import annotations

import os
import zlib

import mmharness_importhook

ENV = "MMHARNESS_ENGINE_NOISE"
LINEAR_MODULE = "vllm.model_executor.layers.linear"


def size() -> float:
    return float(os.environ.get(ENV, "0") or 0)


def _patch(module) -> None:
    import torch

    scale = size()
    cls = module.RowParallelLinear
    real = cls.forward
    directions: dict[tuple, "torch.Tensor"] = {}

    def direction(name: str, rows: int, width: int) -> "torch.Tensor":
        key = (name, rows, width)
        if key not in directions:
            seed = zlib.crc32(f"{name}:{rows}:{width}".encode())
            directions[key] = torch.randn(width, generator=torch.Generator().manual_seed(seed))
        return directions[key]

    def forward(self, input_):
        out = real(self, input_)
        y = out[0] if isinstance(out, tuple) else out
        width = y.shape[-1]
        moved = (y.float() + scale * y.float().std() * direction(getattr(self, "prefix", ""), y.numel() // width,
                                                                 width)).to(y.dtype)
        return (moved, *out[1:]) if isinstance(out, tuple) else moved

    cls.forward = forward


def install() -> None:
    if size() > 0:
        mmharness_importhook.after_import(LINEAR_MODULE, _patch)
