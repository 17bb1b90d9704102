"""LoRA workloads: prompts of each modality, each under a named adapter or
the base model, and the adapters themselves, crafted offline with peft from
the model under test (fixtures/adapters.py).

The adapters a scenario holds:
  tower            the vision tower's linear layers and the vision connector
  lm               the language model's attention
  tower (reloaded) `tower`'s name with weights of another draw: what a user
                   gets after reloading an adapter under the same name
  probe-<group>   exactly one module group each (harness/lora/groups.py)
Every adapter version has its own vLLM id; a request names it by `name`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fixtures import adapters as crafted
from fixtures import media
from harness.engines.base import LoraAdapter
from harness.lora.groups import MODULE_GROUPS
from harness.workloads.audio import PROMPT as AUDIO_PROMPT
from harness.workloads.audio import clips
from harness.workloads.chat import image_part, user, video_part
from harness.workloads.request import Request, Workload

PROMPTS = {"text": "Tell me a short story about the sea.",
           "image": "Describe what you see.",
           "video": "What happens in this video?",
           "audio": AUDIO_PROMPT}
# The scenario family these adapters serve: what its engines need to serve
# them (LoRA on, rank, slots) is in models.toml under [per_family.<this>].
FAMILY = "test_vision_lora"
# The reference engine keeps every adapter the family uses resident, so no
# reference ever runs beside a full set of slots: what slot reuse does is
# judged on the engine under test (test_base_untouched_with_every_slot_full).
REFERENCE_MAX_LORAS = 32
# Another draw of `tower`'s weights, under its name.
RELOAD_SEED = 1


def prompt(modality: str, seed: int = 0) -> list[dict]:
    """One short prompt of a modality; `seed` draws other media."""
    if modality == "text":
        return user(PROMPTS["text"])
    if modality == "image":
        return user(image_part(media.encode_image(media.image(96, 64, seed=500 + seed), "png")),
                    PROMPTS["image"])
    if modality == "video":
        return user(video_part(media.video_frames(4, 64, 48, seed=600 + seed)), PROMPTS["video"])
    if modality == "audio":
        return clips([1.0 + seed], seed=700 + seed)[0].conversation()
    raise ValueError(f"no LoRA prompt for modality {modality!r}")


@dataclass
class Adapters:
    """The adapters crafted for one base model, numbered for the engine."""
    base_dir: Path
    _ids: dict = field(default_factory=dict)

    def _numbered(self, name: str, path: str) -> LoraAdapter:
        """One vLLM id per adapter version (name and weights), from 1."""
        number = self._ids.setdefault((name, path), len(self._ids) + 1)
        return LoraAdapter(name=name, path=path, id=number)

    def of(self, spec: "crafted.AdapterSpec") -> LoraAdapter:
        return self._numbered(spec.name, str(crafted.build_adapter(self.base_dir, spec)))

    @property
    def tower(self) -> LoraAdapter:
        return self.of(crafted.AdapterSpec("tower", crafted.STANDARD["tower"]))

    @property
    def lm(self) -> LoraAdapter:
        return self.of(crafted.AdapterSpec("lm", crafted.STANDARD["lm"]))

    @property
    def tower_reloaded(self) -> LoraAdapter:
        return self.of(crafted.AdapterSpec("tower", crafted.STANDARD["tower"], seed=RELOAD_SEED))

    def published(self, source: str) -> LoraAdapter:
        """An adapter named in the model matrix by hub id or path (the engine
        and peft fetch it themselves), named after its last path part."""
        return self._numbered(Path(source).name, source)

    def probe(self, group: str) -> LoraAdapter:
        return self.of(crafted.AdapterSpec(f"probe-{group}", (group,)))

    def present(self) -> dict[str, list[str]]:
        """The module groups this base has, with their modules."""
        return crafted.groups_present(self.base_dir)


def _name(adapter: LoraAdapter | None) -> str:
    return adapter.name if adapter else "base"


def request(modality: str, adapter: LoraAdapter | None, *, seed: int = 0, label: str = "") -> Request:
    facts = {"modality": modality, "adapter": _name(adapter)}
    if adapter:
        facts["adapter_id"] = adapter.id
    return Request(label or f"{modality}@{_name(adapter)}", prompt(modality, seed), facts, adapter=adapter)


def workload(name: str, requests: list[Request]) -> Workload:
    return Workload(name, tuple(requests), {"workload": {r.label: r.facts for r in requests}})


def effect(modality: str, adapter: LoraAdapter) -> Workload:
    """One prompt of a modality under the adapter and under the base model."""
    return workload(f"effect-{adapter.name}-{modality}",
                    [request(modality, None), request(modality, adapter)])


def mixed(name: str, order: list[tuple[str, LoraAdapter | None]]) -> Workload:
    """Requests sent together in this order, each (modality, adapter); the
    same modality again draws other media, so no two requests share input."""
    seen: dict[str, int] = {}
    reqs = []
    for i, (modality, adapter) in enumerate(order):
        seed = seen[modality] = seen.get(modality, -1) + 1
        reqs.append(request(modality, adapter, seed=seed, label=f"{i}-{modality}@{_name(adapter)}"))
    return workload(name, reqs)


def with_adapter(work: Workload, adapter: LoraAdapter) -> Workload:
    """The same workload, every request under `adapter`."""
    reqs = [Request(r.label, r.conversation, {**r.facts, "adapter": adapter.name}, r.source, adapter)
            for r in work.requests]
    return Workload(f"{work.name or 'work'}-{adapter.name}", tuple(reqs), work.facts)


def crossed(work: Workload, adapters: list[LoraAdapter | None]) -> Workload:
    """Each request's input under every other adapter (and the base model),
    labelled "<label>~<adapter>": the wrong answers a row must not give, and
    what tells which adapter a wrong row really ran under. A row's own
    adapter is left out: that is its reference."""
    reqs = [Request(f"{r.label}~{_name(a)}", r.conversation, {**r.facts, "adapter": _name(a)}, adapter=a)
            for r in work.requests for a in adapters if a != r.adapter]
    return workload(f"{work.name}-crossed", reqs)


def targets(adapter: LoraAdapter | None) -> list[str]:
    """The module groups an adapter of this workload targets, for the record."""
    if adapter is None:
        return []
    if adapter.name.startswith("probe-"):
        return [adapter.name.removeprefix("probe-")]
    return [f for f in crafted.STANDARD.get(adapter.name, ()) if f in MODULE_GROUPS]
