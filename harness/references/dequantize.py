"""The bfloat16 reference of a 4-bit `pack-quantized` checkpoint.

One job: from a compressed-tensors pack-quantized model directory, write the
same model unquantized. Every packed weight becomes the weight it means,
(q - zero_point) * scale per group (fixtures.tiny_models.pack_quantized, the
format's arithmetic, which shares no code with the engine's loader);
per-expert projections are stacked back into HF transformers' 3-D expert
tensors; every tensor is saved in bfloat16 and the quantization_config is
dropped. HF transformers then runs the model the engine was asked to run, so
comparing the two shows whether the engine unpacked the weights right.
"""
from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from fixtures.tiny_models.pack_quantized import SUFFIXES, decompress

WEIGHTS = "model.safetensors"
_EXPERT = re.compile(r"^(?P<experts>.+\.experts)\.(?P<index>\d+)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")
# Files of a model directory that are not copied as they are.
_REWRITTEN = {WEIGHTS, "config.json", "mmharness-recipe.json"}


class NotPackQuantized(ValueError):
    """The directory's config does not declare compressed-tensors pack-quantized weights."""


def dequantized_tensors(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Checkpoint tensors with every packed layer replaced by its float32
    weight, and per-expert weights stacked as HF's experts.gate_up_proj
    [E, 2I, H] and experts.down_proj [E, H, I]."""
    layers: dict[str, dict[str, torch.Tensor]] = defaultdict(dict)
    plain: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        layer, _, suffix = name.rpartition(".")
        if suffix in SUFFIXES:
            layers[layer][suffix] = tensor
        else:
            plain[name] = tensor.float()
    experts: dict[str, dict[str, dict[int, torch.Tensor]]] = defaultdict(lambda: defaultdict(dict))
    for layer, parts in layers.items():
        missing = set(SUFFIXES) - set(parts)
        if missing:
            raise ValueError(f"{layer}: packed layer lacks {sorted(missing)}")
        weight = decompress(parts)
        match = _EXPERT.match(f"{layer}.weight")
        if match:
            experts[match["experts"]][match["proj"]][int(match["index"])] = weight
        else:
            plain[f"{layer}.weight"] = weight
    for prefix, projs in experts.items():
        count = len(projs["down_proj"])
        if any(sorted(projs[p]) != list(range(count)) for p in ("gate_proj", "up_proj", "down_proj")):
            raise ValueError(f"{prefix}: experts' projections are incomplete")
        plain[f"{prefix}.gate_up_proj"] = torch.stack(
            [torch.cat([projs["gate_proj"][e], projs["up_proj"][e]]) for e in range(count)])
        plain[f"{prefix}.down_proj"] = torch.stack([projs["down_proj"][e] for e in range(count)])
    return plain


def dequantize_model(quantized_dir: str | Path, out_dir: str | Path) -> Path:
    """Write the bfloat16 model that `quantized_dir` means into out_dir (created; must be empty)."""
    source, target = Path(quantized_dir), Path(out_dir)
    config = json.loads((source / "config.json").read_text())
    quant = config.pop("quantization_config", None) or {}
    if quant.get("quant_method") != "compressed-tensors" or quant.get("format") != "pack-quantized":
        raise NotPackQuantized(f"{source}: not a compressed-tensors pack-quantized checkpoint "
                               f"(quant_method {quant.get('quant_method')!r}, format {quant.get('format')!r})")
    target.mkdir(parents=True, exist_ok=True)
    if any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty")
    tensors = dequantized_tensors(load_file(source / WEIGHTS))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in sorted(tensors.items())},
              target / WEIGHTS, metadata={"format": "pt"})
    config["dtype"] = "bfloat16"
    (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for path in source.iterdir():
        if path.is_file() and path.name not in _REWRITTEN:
            shutil.copy2(path, target / path.name)
    return target
