"""The model class vLLM resolved for an engine, read off its log (vLLM's
"Resolved architecture: X", vllm/config/model.py): every record names it,
and a model vLLM serves through its Transformers backend's fallback
(`Transformers*ForCausalLM`, `TransformersMultiModal*`) is not run as the
model's own class, so what its checks find is the backend's, not the
model's."""
from __future__ import annotations

import re

_RESOLVED = re.compile(r"Resolved architecture: (\w+)")


def resolved(log_text: str) -> str | None:
    """The last architecture the engine's log says it resolved; None where it says none."""
    found = _RESOLVED.findall(log_text)
    return found[-1] if found else None


def is_transformers_fallback(architecture: str | None) -> bool:
    return bool(architecture) and architecture.startswith("Transformers")


def fallback_cause(architecture: str | None, model: str) -> str | None:
    """Why the engine does not run the model's own class, or None where it does (or did not say)."""
    if is_transformers_fallback(architecture):
        return (f"vLLM resolved {model} to its Transformers backend's {architecture}, not the model's own "
                "class: the checks would judge the fallback")
    return None
