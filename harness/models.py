"""The model matrix (models.toml): which models a tier runs, and how.

Validation is strict and happens at collection, before any engine starts:
a typo in the matrix must never turn into a half-run nightly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from fixtures.tiny_models import RECIPES
from harness.files import load_toml
from harness.versions import version_in
from harness.memory.card.profiles import UnknownCard, get_profile

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "models.toml"
TIERS = ("cpu", "gpu")
MODALITIES = frozenset({"text", "image", "audio", "video"})
REQUIRED = ("name", "model", "modalities", "engine_args")
# The families that run only for the entries that say so (`fuzz = true`, ...).
FAMILY_FLAGS = ("fuzz", "soak", "cache", "aborts")
OPTIONAL = ("env", "gated", "notes", "card", "build", "lora", *FAMILY_FLAGS, "optional", "zoo", "tp_sizes",
            "per_family")
# A zoo member's reach: "sample" runs in every run, "full" only in a run of the whole zoo (--zoo full).
ZOO_REACH = ("sample", "full")
LORA_KEYS = ("published", "tp_sizes", "supported")
TINY_PREFIX = "tiny:"
# The top-level table of engine arguments per scenario family.
PER_FAMILY_TABLE = "per_family"
FAMILY_KEYS = ("engine_args",)
# The top-level table of settings per tier: [tiers.<tier>].
TIERS_TABLE = "tiers"
TIER_KEYS = ("stall_s", "soak")
SCENARIOS_DIR = ROOT / "scenarios"


class ModelMatrixError(ValueError):
    pass


@dataclass(frozen=True)
class TierSettings:
    """A tier's own settings ([tiers.<tier>] in the matrix)."""
    # The stall bound (harness.engines.progress): a request in flight with no
    # progress for this long, on an engine that is alive, is a hang.
    stall_s: float
    # The soak family's table ([tiers.<tier>.soak]), read by harness.soak.settings.
    soak: dict
    label: str


def tier_settings(tier: str, path: str | Path | None = None) -> TierSettings:
    path = Path(path or DEFAULT_FILE)
    raw = _read(path).get(TIERS_TABLE, {}).get(tier)
    label = f"{path}: [{TIERS_TABLE}.{tier}]"
    if not isinstance(raw, dict):
        raise ModelMatrixError(f"{label} is missing: it must give {list(TIER_KEYS)}")
    if set(raw) != set(TIER_KEYS):
        raise ModelMatrixError(f"{label} must give exactly {list(TIER_KEYS)}, got {sorted(raw)}")
    stall = raw["stall_s"]
    if isinstance(stall, bool) or not isinstance(stall, (int, float)) or stall <= 0:
        raise ModelMatrixError(f"{label}: stall_s must be a number of seconds > 0, got {stall!r}")
    return TierSettings(stall_s=float(stall), soak=raw["soak"], label=label)


def _read(path: Path) -> dict:
    return load_toml(path, ModelMatrixError, "model matrix")


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
    # `tp_sizes`: the TP sizes it runs (default all the family has).
    lora: dict | None = field(default=None, hash=False)
    # The fuzz family (scenarios/test_fuzz_multimodal.py) runs for it.
    fuzz: bool = False
    # The soak family (scenarios/test_soak.py) runs for it.
    soak: bool = False
    # The cache matrix (scenarios/test_cache_consistency.py) runs for it.
    cache: bool = False
    # The aborts-and-preemption family (scenarios/test_aborts_preemption.py) runs for it.
    aborts: bool = False
    # Runs only when named with --model: too slow for the tier's default run.
    optional: bool = False
    # A member of the model zoo: "sample" (every run) or "full" (--zoo full,
    # the nightly); None: not of the zoo, in every run.
    zoo: str | None = None
    # The TP sizes above 1 its TP-invariance checks run at (outside the LoRA
    # family, whose `lora.tp_sizes` it reads): where its heads split. None: none.
    tp_sizes: tuple[int, ...] = ()
    # Engine arguments per scenario family: the matrix's [per_family.<family>]
    # with this entry's own [<tier>.per_family.<family>] over them.
    per_family: dict[str, dict] = field(default_factory=dict, hash=False)

    def serves_lora(self, version: str | None) -> bool:
        """The matrix says the engine serves LoRA for this model at this
        version (`lora.supported`): a refusal there is a regression."""
        supported = (self.lora or {}).get("supported")
        return supported is not None and version_in(version, supported)

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

    def family_args(self, family: str) -> dict:
        """The engine arguments a scenario family adds for this entry."""
        return dict(self.per_family.get(family, {}))

    def engine_args_for(self, family: str) -> dict:
        """The engine arguments of this entry in a scenario family, before
        what a call asks for itself: the entry's, then the family's."""
        return {**self.engine_args, **self.family_args(family)}


def scenario_families(directory: Path = SCENARIOS_DIR) -> list[str]:
    """The scenario families: the scenario modules' names."""
    return sorted(p.stem for p in directory.glob("test_*.py"))


def _specifiers(text) -> bool:
    """`text` is "*" or a packaging specifier set."""
    if not isinstance(text, str):
        return False
    try:
        SpecifierSet("" if text == "*" else text)
    except InvalidSpecifier:
        return False
    return True


def _family_args(label: str, table, known: list[str]) -> dict[str, dict]:
    """A `per_family` table: {family: {"engine_args": {...}}} -> {family: args}."""
    if not isinstance(table, dict):
        raise ModelMatrixError(f"{label}: per_family must be a table of scenario families")
    args = {}
    for family, settings in table.items():
        if family not in known:
            raise ModelMatrixError(f"{label}: unknown scenario family {family!r} in per_family; "
                                   f"known (the scenario modules' names): {known}")
        if not (isinstance(settings, dict) and set(settings) <= set(FAMILY_KEYS)
                and isinstance(settings.get("engine_args", {}), dict)):
            raise ModelMatrixError(f"{label}: per_family.{family} must be a table with only "
                                   f"{list(FAMILY_KEYS)} (a table), got {settings!r}")
        args[family] = dict(settings.get("engine_args", {}))
    return args


def _entry(tier: str, i: int, raw: dict, where: Path, defaults: dict[str, dict],
           known: list[str]) -> ModelEntry:
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
                                 and isinstance(lora.get("tp_sizes", []), list)
                                 and all(isinstance(n, int) and n > 0 for n in lora.get("tp_sizes", []))
                                 and _specifiers(lora.get("supported", "*"))):
        moved = (" (max_lora_rank is an engine argument: give it in "
                 f"[{tier}.per_family.test_vision_lora] engine_args)"
                 if isinstance(lora, dict) and "max_lora_rank" in lora else "")
        raise ModelMatrixError(f"{label}: lora must be a table with only {list(LORA_KEYS)} "
                               f"(a list of adapter hub ids or paths; a list of TP sizes; the engine "
                               f"versions that serve it, as specifiers), "
                               f"got {lora!r}{moved}")
    for flag in FAMILY_FLAGS:
        if not isinstance(raw.get(flag, False), bool):
            raise ModelMatrixError(f"{label}: {flag} must be true or false, got {raw[flag]!r}")
    tp_sizes = raw.get("tp_sizes", [])
    if not (isinstance(tp_sizes, list) and all(isinstance(n, int) and not isinstance(n, bool) and n > 1
                                               for n in tp_sizes)):
        raise ModelMatrixError(f"{label}: tp_sizes must be a list of TP sizes above 1, got {tp_sizes!r}")
    if raw.get("zoo", ZOO_REACH[0]) not in ZOO_REACH:
        raise ModelMatrixError(f"{label}: zoo must be one of {list(ZOO_REACH)}, got {raw['zoo']!r}")
    own = _family_args(label, raw.get("per_family", {}), known)
    per_family = {f: {**defaults.get(f, {}), **own.get(f, {})} for f in {*defaults, *own}}
    return ModelEntry(tier=tier, name=raw["name"], model=raw["model"],
                      modalities=frozenset(mods), engine_args=dict(raw["engine_args"]),
                      env={k: str(v) for k, v in raw.get("env", {}).items()},
                      gated=bool(raw.get("gated", False)), notes=str(raw.get("notes", "")),
                      card=card, build=dict(raw.get("build", {})),
                      lora=None if lora is None else dict(lora),
                      **{flag: raw.get(flag, False) for flag in FAMILY_FLAGS},
                      optional=bool(raw.get("optional", False)), zoo=raw.get("zoo"),
                      tp_sizes=tuple(tp_sizes),
                      per_family=per_family)


def load_matrix(path: str | Path | None = None) -> dict[str, list[ModelEntry]]:
    path = Path(path or DEFAULT_FILE)
    data = _read(path)
    unknown = set(data) - set(TIERS) - {PER_FAMILY_TABLE, TIERS_TABLE}
    if unknown:
        raise ModelMatrixError(f"{path}: unknown tier(s) {sorted(unknown)}; known: {list(TIERS)} "
                               f"(and [{PER_FAMILY_TABLE}.<family>], [{TIERS_TABLE}.<tier>])")
    known = scenario_families()
    defaults = _family_args(f"{path}: [{PER_FAMILY_TABLE}]", data.get(PER_FAMILY_TABLE, {}), known)
    matrix = {}
    for tier in TIERS:
        entries = [_entry(tier, i, raw, path, defaults, known) for i, raw in enumerate(data.get(tier, []))]
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
