"""Make every engine process behave as a host of no more than one level.

MMHARNESS_ENGINE_KERNELS=avx2|avx512|avx512-bf16 masks, in torch.cpu's
capability answer, every feature above that level. vLLM asks torch.cpu's
probes (`_is_avx512_supported`, `_is_avx512_bf16_supported`,
`_is_vnni_supported`, `_is_amx_tile_supported`, `_is_amx_fp16_supported`)
to pick its kernel library and its AMX, W4A8 and attention paths; each
probe reads `torch.cpu.get_capabilities()`, so masking that answer (and the
C call behind it) moves them all, before vLLM imports. Its AMD Zen check
reads /proc/cpuinfo for AVX-512 itself, so it is masked below AVX-512.
The harness sets ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA beside this.
Stdlib only at start-up; torch is patched right after its own import.
"""
from __future__ import annotations

import os

import mmharness_importhook

ENV = "MMHARNESS_ENGINE_KERNELS"
_ABOVE_AVX2 = ("avx512", "amx", "avx_vnni", "avx10")
# Capability keys above each level (prefixes of torch.cpu.get_capabilities()).
MASKED = {
    "avx2": _ABOVE_AVX2,
    "avx512": ("avx512_bf16", "avx512_fp16", "amx", "avx10"),
    "avx512-bf16": ("avx512_fp16", "amx", "avx10"),
}


def masked(capabilities, level: str) -> dict:
    prefixes = MASKED[level]
    return {key: (False if isinstance(value, bool) and key.startswith(prefixes) else value)
            for key, value in dict(capabilities).items()}


def _patch_torch_cpu(module) -> None:
    import torch
    from types import MappingProxyType

    level = os.environ[ENV]
    real = torch._C._cpu._get_cpu_capability

    def _get_cpu_capability():
        return masked(real(), level)

    torch._C._cpu._get_cpu_capability = _get_cpu_capability
    module.get_capabilities = lambda: MappingProxyType(_get_cpu_capability())


def _patch_platforms(module) -> None:
    if os.environ[ENV] == "avx2" and hasattr(module, "_is_amd_zen_cpu"):
        module._is_amd_zen_cpu = lambda: False


def install() -> None:
    level = os.environ.get(ENV)
    if level not in MASKED:
        raise SystemExit(f"mmharness: {ENV}={level!r}: expected one of {', '.join(MASKED)}")
    mmharness_importhook.after_import("torch.cpu", _patch_torch_cpu)
    mmharness_importhook.after_import("vllm.platforms", _patch_platforms)
