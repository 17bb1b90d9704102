"""The card as the engine's memory query answers it (the in-engine shim's
control, harness/engines/control.py): free and total bytes, on any machine.

On the GPU tier the ballast makes the real query answer the card's figures;
the shim then records the answers and changes nothing. Emulated answers
serve where no ballast can: the CPU tier, and cards whose free memory is far
below their total (the call-site check), on both tiers.

A tiny model's encoder needs far less per item than a real checkpoint's, so
a real card's figures would never make it chunk. Emulated figures are
therefore scaled by the ratio of the two per-item encoder costs: the tiny
model meets the card as the real model meets the real card. The encoder's
per-item transient grows with patches per item times the position embedding
size (the lookup over every patch's (x, y) position), so that product is the
ratio; the real side is Gemma4's released vision tower.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.units import MiB

from .profiles import CardProfile

# Gemma4's released vision tower: 280 soft tokens per image of 3x3 pooled
# patches, 10240 position embeddings.
REFERENCE_PATCHES_PER_ITEM = 280 * 3 * 3
REFERENCE_POSITION_EMBEDDINGS = 10240
# The call-site check's card: free memory this far below its total.
LOW_FREE_FRACTION = 1 / 20


@dataclass(frozen=True)
class MemoryAnswer:
    """What the engine's memory query answers during an encoder call."""
    card: str
    free: int
    total: int
    scale: float  # of the card's real figures; 1.0: unscaled

    def describe(self) -> str:
        scaled = f", scaled x{self.scale:.4g} to the model" if self.scale != 1.0 else ""
        return f"{self.card}: free {self.free / MiB:.1f} MiB of {self.total / MiB:.1f} MiB{scaled}"

    def as_steering(self) -> dict:
        return {"memory": (self.free, self.total)}

    def low_free(self) -> "MemoryAnswer":
        """The same card with free memory far below its total."""
        return MemoryAnswer(f"{self.card}-low-free", int(self.total * LOW_FREE_FRACTION), self.total,
                            self.scale)


def encoder_scale(model_dir: str | Path) -> float:
    """The model's per-item vision-encoder cost over the real Gemma4's (at
    most 1): from its config.json, or 1.0 where it has no such tower."""
    config_path = Path(model_dir) / "config.json"
    if not config_path.is_file():  # a hub id: the real checkpoint itself
        return 1.0
    vision = json.loads(config_path.read_text()).get("vision_config") or {}
    try:
        patches = vision["default_output_length"] * vision["pooling_kernel_size"] ** 2
        positions = vision["position_embedding_size"]
    except KeyError:
        return 1.0
    return min(1.0, patches * positions / (REFERENCE_PATCHES_PER_ITEM * REFERENCE_POSITION_EMBEDDINGS))


def vision_position_embeddings(model_dir: str | Path) -> int:
    """The vision tower's position-embedding size (what its chunk function
    takes), from a local checkpoint's config.json."""
    config = json.loads((Path(model_dir) / "config.json").read_text())
    return int(config["vision_config"]["position_embedding_size"])


def card_answer(profile: CardProfile, scale: float = 1.0) -> MemoryAnswer:
    """The card after its model loaded: its typical free figure and its
    capacity, times the scale."""
    return MemoryAnswer(profile.id, int(profile.typical_free_after_load_bytes * scale),
                        int(profile.capacity_bytes * scale), scale)
