"""The module groups a LoRA adapter can target, named as a report says them.

A group is one kind of linear layer in one part of the model: the vision
tower's q projections, the language model's MLP up projections, the vision
connector. A probe adapter targets exactly one group, so that a probe that
changes nothing names the group the engine silently ignored.

Each group knows its modules by two names: the HF checkpoint's (what peft
targets when it crafts an adapter) and vLLM's (what the engine wraps with
LoRA, after its checkpoint-prefix mapping and its packing of q/k/v and
gate/up into one layer). Gemma4 and Gemma3n spellings; a group whose HF
pattern matches no module of a base model is absent from it (the tiny
Gemma4's audio tower has no attention or MLP without a conformer layer).

Gemma4 wraps each tower projection in a clippable module holding a `.linear`;
the patterns match both, and whoever crafts an adapter keeps the nn.Linear
(fixtures.adapters: peft cannot wrap the clippable module).

The audio towers are conformers, not transformer blocks: their linear layers
are attention q/k/v and `post` (the output projection), two macaron
feed-forwards (`ffw_layer_1` expands, `ffw_layer_2` contracts) and the light
convolution's `linear_start`/`linear_end`. Gemma4 names them
`audio_tower.layers.N.{self_attn,feed_forward1,feed_forward2,lconv1d}...`,
Gemma3n `audio_tower.conformer.N.{attention.attn,attention,ffw_layer_start,
ffw_layer_end,lconv1d}...`. The audio groups are these seven (AUDIO_PROJECTIONS);
the relative-position projections (`relative_k_proj`, `pos_proj`) and the
subsampling convolutions are left out. Gemma3n's vision tower is a timm
MobileNet of convolutions: no vision group is present in it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PROJECTIONS = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
               "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
               "down": "mlp.down_proj"}
# vLLM packs these into one layer in the language model (packed_modules_mapping).
PACKED = {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "gate": "gate_up_proj",
          "up": "gate_up_proj"}


@dataclass(frozen=True)
class ModuleGroup:
    name: str          # "vision.q", "language.down", "connector.vision"
    part: str          # language | vision | audio | connector
    modality: str      # the input whose output the group changes: text, image, audio
    hf_pattern: str    # full-match regex over HF module names (peft target_modules)
    vllm_pattern: str  # full-match regex over vLLM module names

    def hf_modules(self, names) -> list[str]:
        return [n for n in names if re.fullmatch(self.hf_pattern, n)]


def _tower(part: str, modality: str, prefix: str) -> list[ModuleGroup]:
    # Gemma4's towers wrap each projection as `<proj>.linear` (a clippable linear).
    return [ModuleGroup(f"{part}.{short}", part, modality,
                   rf"model\.{prefix}\.(?:.+\.)?layers\.\d+\.{re.escape(proj)}(?:\.linear)?",
                   rf"{prefix}\.(?:.+\.)?layers\.\d+\.{re.escape(proj)}(?:\.linear)?")
            for short, proj in PROJECTIONS.items()]


_AUDIO_LAYER = r"audio_tower\.(?:layers|conformer)\.\d+\."
# Conformer projections: Gemma4 spelling | Gemma3n spelling (regex, after the layer).
AUDIO_PROJECTIONS = {
    "q": r"(?:self_attn|attention\.attn)\.q_proj", "k": r"(?:self_attn|attention\.attn)\.k_proj",
    "v": r"(?:self_attn|attention\.attn)\.v_proj", "o": r"(?:self_attn|attention)\.post",
    "ffw_in": r"(?:feed_forward[12]|ffw_layer_(?:start|end))\.ffw_layer_1",
    "ffw_out": r"(?:feed_forward[12]|ffw_layer_(?:start|end))\.ffw_layer_2",
    "lconv": r"lconv1d\.linear_(?:start|end)",
}


def _audio() -> list[ModuleGroup]:
    # vLLM runs the HF audio tower with its linears replaced in place: same names, no `model.`.
    return [ModuleGroup(f"audio.{short}", "audio", "audio",
                   rf"model\.{_AUDIO_LAYER}{proj}(?:\.linear)?", rf"{_AUDIO_LAYER}{proj}(?:\.linear)?")
            for short, proj in AUDIO_PROJECTIONS.items()]


def _language() -> list[ModuleGroup]:
    return [ModuleGroup(f"language.{short}", "language", "text",
                   rf"model\.language_model\.layers\.\d+\.{re.escape(proj)}",
                   rf"language_model\.model\.layers\.\d+\."
                   rf"{re.escape(proj.rsplit('.', 1)[0] + '.' + PACKED.get(short, proj.rsplit('.', 1)[1]))}")
            for short, proj in PROJECTIONS.items()]


MODULE_GROUPS: dict[str, ModuleGroup] = {f.name: f for f in [
    *_language(),
    *_tower("vision", "image", "vision_tower"),
    *_audio(),
    ModuleGroup("connector.vision", "connector", "image", r"model\.embed_vision\.embedding_projection",
           r"embed_vision\.embedding_projection"),
    ModuleGroup("connector.audio", "connector", "audio", r"model\.embed_audio\.embedding_projection",
           r"embed_audio\.embedding_projection"),
]}


def module_group(name: str) -> ModuleGroup:
    try:
        return MODULE_GROUPS[name]
    except KeyError:
        raise ValueError(f"unknown module group {name!r}; known: {sorted(MODULE_GROUPS)}") from None


def of_part(part: str) -> list[ModuleGroup]:
    return [f for f in MODULE_GROUPS.values() if f.part == part]
