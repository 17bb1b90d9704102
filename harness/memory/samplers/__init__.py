"""Memory samplers (one interface, a host and an NVML backend) and the leak
check at engine teardown."""
from .base import DEFAULT_RATE_HZ, Sampler, SamplerResult, SamplerUnavailable
from .host import ENGINE_RSS, HostSampler
from .nvml import NvmlSampler, engine_series, used_series
from .process_tree import ProcessTree, SeenProcess

__all__ = [
    "DEFAULT_RATE_HZ", "ENGINE_RSS", "HostSampler", "NvmlSampler", "ProcessTree",
    "Sampler", "SamplerResult", "SamplerUnavailable", "SeenProcess", "engine_series", "used_series",
]
