"""The model matrix (models.toml): which models a tier runs, and how.

Validation is strict and happens at collection, before any engine starts:
a typo in the matrix must never turn into a half-run nightly.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from fixtures.tiny_models.recipes import RECIPES
from harness.memory.card.profiles import UnknownCard, get_profile

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "models.toml"
TIERS = ("cpu", "gpu")
MODALITIES = frozenset({"text", "image", "audio", "video"})
REQUIRED = ("name", "model", "modalities", "engine_args")
OPTIONAL = ("env", "gated", "notes", "card", "build", "lora", "optional")
LORA_KEYS = ("published", "max_lora_rank", "tp_sizes")
TINY_PREFIX = "tiny:"


class ModelMatrixError(ValueError):
    pass


@dataclass(frozen=True)
class ModelEntry:
    tier: str
    name: str
    model: str
    modalities: frozenset[str]
    engine_args: dict = field(hash=False)
    env: dict = field(default_factory=dict, hash=False)
    gated: bool = False
    notes: str = ""
    # The card profile its low-memory checks emulate unless --card names one.
    card: str | None = None
    # Tiny builds only: values merged into the recipe (fixtures.tiny_models).
    build: dict = field(default_factory=dict, hash=False)
    # The LoRA family runs for entries that have this table (crafted adapters);
    # `published`: adapters by hub id or path (GPU tier), beside the crafted;
    # `max_lora_rank`: the engine's, when a published adapter's rank is above 8;
    # `tp_sizes`: the TP sizes it runs (default all the family has).
    lora: dict | None = field(default=None, hash=False)
    # Runs only when named with --model: too slow for the tier's default run.
    optional: bool = False

    @property
    def tiny_arch(self) -> str | None:
        """The fixture arch for a tiny offline build, None for a hub id."""
        return self.model[len(TINY_PREFIX):] if self.model.startswith(TINY_PREFIX) else None

    @property
    def quantized(self) -> bool:
        """A tiny build whose recipe quantizes its weights."""
        return self.tiny_arch is not None and "quantization" in RECIPES.get(self.tiny_arch, {})

    def has(self, modality: str) -> bool:
        return modality in self.modalities


def _entry(tier: str, i: int, raw: dict, where: Path) -> ModelEntry:
    label = f"{where}: [[{tier}]] entry {i + 1} ({raw.get('name', 'unnamed')})"
    unknown = set(raw) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        raise ModelMatrixError(f"{label}: unknown field(s) {sorted(unknown)}; "
                               f"allowed: {list(REQUIRED + OPTIONAL)}")
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise ModelMatrixError(f"{label}: missing required field(s) {missing}")
    mods = raw["modalities"]
    if not isinstance(mods, list) or not mods or set(mods) - MODALITIES:
        raise ModelMatrixError(f"{label}: modalities must be a non-empty list from "
                               f"{sorted(MODALITIES)}, got {mods!r}")
    for key in ("engine_args", "env"):
        if key in raw and not isinstance(raw[key], dict):
            raise ModelMatrixError(f"{label}: {key} must be a table")
    if not isinstance(raw["name"], str) or not isinstance(raw["model"], str):
        raise ModelMatrixError(f"{label}: name and model must be strings")
    if "build" in raw and not (isinstance(raw["build"], dict) and raw["model"].startswith(TINY_PREFIX)):
        raise ModelMatrixError(f"{label}: build must be a table, and only a tiny model has one")
    card = raw.get("card")
    if card is not None:
        try:
            get_profile(card)
        except (UnknownCard, AttributeError) as e:
            raise ModelMatrixError(f"{label}: card: {e}") from None
    lora = raw.get("lora")
    if lora is not None and not (isinstance(lora, dict) and set(lora) <= set(LORA_KEYS)
                                 and isinstance(lora.get("published", []), list)
                                 and all(isinstance(a, str) for a in lora.get("published", []))
                                 and isinstance(lora.get("max_lora_rank", 8), int)
                                 and isinstance(lora.get("tp_sizes", []), list)
                                 and all(isinstance(n, int) and n > 0 for n in lora.get("tp_sizes", []))):
        raise ModelMatrixError(f"{label}: lora must be a table with only {list(LORA_KEYS)} "
                               f"(a list of adapter hub ids or paths; the largest rank they have; "
                               f"a list of TP sizes), got {lora!r}")
    return ModelEntry(tier=tier, name=raw["name"], model=raw["model"],
                      modalities=frozenset(mods), engine_args=dict(raw["engine_args"]),
                      env={k: str(v) for k, v in raw.get("env", {}).items()},
                      gated=bool(raw.get("gated", False)), notes=str(raw.get("notes", "")),
                      card=card, build=dict(raw.get("build", {})),
                      lora=None if lora is None else dict(lora), optional=bool(raw.get("optional", False)))


def load_matrix(path: str | Path | None = None) -> dict[str, list[ModelEntry]]:
    path = Path(path or DEFAULT_FILE)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ModelMatrixError(f"model matrix not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ModelMatrixError(f"{path}: not valid TOML: {e}") from None
    unknown = set(data) - set(TIERS)
    if unknown:
        raise ModelMatrixError(f"{path}: unknown tier(s) {sorted(unknown)}; known: {list(TIERS)}")
    matrix = {}
    for tier in TIERS:
        entries = [_entry(tier, i, raw, path) for i, raw in enumerate(data.get(tier, []))]
        names = [e.name for e in entries]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ModelMatrixError(f"{path}: duplicate name(s) in tier {tier}: {sorted(dupes)}")
        matrix[tier] = entries
    return matrix


def models_for(tier: str, path: str | Path | None = None, modality: str | None = None) -> list[ModelEntry]:
    if tier not in TIERS:
        raise ModelMatrixError(f"unknown tier {tier!r}; known: {list(TIERS)}")
    entries = load_matrix(path)[tier]
    return [e for e in entries if modality is None or e.has(modality)]
