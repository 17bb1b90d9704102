"""Small-card emulation: card profiles, the ballast that shrinks a big GPU to
a profile's capacity, and the check that the engine's peak fits it."""
from .ballast import Ballast, BallastError, BallastReady, emulation_unavailable_reason
from .capacity import EnginePeak, check_within_budget, engine_peak
from .profiles import PROFILES, CardProfile, UnknownCard, after_load_record, get_profile, gpu_memory_utilization

__all__ = [
    "PROFILES", "Ballast", "BallastError", "BallastReady", "CardProfile", "EnginePeak",
    "UnknownCard", "after_load_record", "check_within_budget", "emulation_unavailable_reason",
    "engine_peak", "get_profile", "gpu_memory_utilization",
]
