"""fixtures.adapters: crafted peft LoRA adapters, their groups, their cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fixtures import adapters
from fixtures.adapters import AdapterSpec, build_adapter, groups_present, probes
from fixtures.tiny_models import build_tiny_model

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFORMER = {"audio_config": {"num_hidden_layers": 1}}


@pytest.fixture(scope="module")
def gemma4() -> Path:
    return build_tiny_model("gemma4")


@pytest.fixture(scope="module")
def conformer() -> Path:
    return build_tiny_model("gemma4", overrides=CONFORMER)


@pytest.fixture(scope="module")
def present(gemma4) -> dict[str, list[str]]:
    return groups_present(gemma4)


def test_tiny_gemma4_has_no_audio_tower_family_but_every_other(present):
    assert not [f for f in present if f.startswith("audio.")]
    assert {f"vision.{p}" for p in ("q", "k", "v", "o", "gate", "up", "down")} <= set(present)
    assert {f"language.{p}" for p in ("q", "k", "v", "o", "gate", "up", "down")} <= set(present)
    assert present["connector.vision"] == ["model.embed_vision.embedding_projection"]
    assert present["connector.audio"] == ["model.embed_audio.embedding_projection"]
    # Gemma4's clippable wrapper is skipped for the nn.Linear inside it.
    assert all(m.endswith(".linear") for f, ms in present.items() if f.startswith("vision.") for m in ms)
    assert present["vision.q"] == ["model.vision_tower.encoder.layers.0.self_attn.q_proj.linear"]


def test_conformer_build_names_its_audio_families(conformer):
    present = groups_present(conformer)
    layer = "model.audio_tower.layers.0"
    assert present["audio.q"] == [f"{layer}.self_attn.q_proj.linear"]
    assert present["audio.o"] == [f"{layer}.self_attn.post.linear"]
    assert present["audio.ffw_in"] == [f"{layer}.feed_forward1.ffw_layer_1.linear",
                                       f"{layer}.feed_forward2.ffw_layer_1.linear"]
    assert present["audio.ffw_out"] == [f"{layer}.feed_forward1.ffw_layer_2.linear",
                                        f"{layer}.feed_forward2.ffw_layer_2.linear"]
    assert present["audio.lconv"] == [f"{layer}.lconv1d.linear_start.linear", f"{layer}.lconv1d.linear_end.linear"]
    assert {"audio.k", "audio.v"} <= set(present)


def test_gemma3n_conformer_spelling_and_no_vision_tower_family():
    present = groups_present(build_tiny_model("gemma3n"))
    assert not [f for f in present if f.startswith("vision.")]  # a timm MobileNet of convolutions
    assert present["audio.q"] == ["model.audio_tower.conformer.0.attention.attn.q_proj"]
    assert present["audio.o"] == ["model.audio_tower.conformer.0.attention.post"]
    assert present["audio.ffw_in"] == ["model.audio_tower.conformer.0.ffw_layer_start.ffw_layer_1",
                                       "model.audio_tower.conformer.0.ffw_layer_end.ffw_layer_1"]
    assert "connector.vision" in present


def test_adapter_names_exactly_its_families_modules_with_nonzero_weights(gemma4, present, tmp_path):
    spec = AdapterSpec("tower", adapters.STANDARD["tower"], seed=3)
    path = build_adapter(gemma4, spec, root=tmp_path)
    expected = sorted({m for f in spec.groups for m in present[f]})
    config = json.loads((path / "adapter_config.json").read_text())
    assert isinstance(config["target_modules"], list) and sorted(config["target_modules"]) == expected
    assert (config["r"], config["lora_alpha"], config["peft_type"]) == (8, 16, "LORA")
    tensors = load_file(path / "adapter_model.safetensors")
    assert set(tensors) == {f"base_model.model.{m}.lora_{p}.weight" for m in expected for p in "AB"}
    for name, t in tensors.items():
        assert t.dtype == torch.bfloat16 and t.abs().min() >= 0 and t.count_nonzero() == t.numel(), name
        assert 0.3 < t.float().std() < 0.7, name  # N(0, 1) * 0.5
    a = tensors["base_model.model.model.embed_vision.embedding_projection.lora_A.weight"]
    assert a.shape[0] == 8


def test_adapter_loads_in_peft_on_exactly_the_spec_modules(gemma4, present, tmp_path):
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer
    from transformers import AutoModelForImageTextToText

    spec = AdapterSpec("probe-vision.q", ("vision.q", "connector.vision"))
    path = build_adapter(gemma4, spec, root=tmp_path)
    model = PeftModel.from_pretrained(AutoModelForImageTextToText.from_pretrained(gemma4), path)
    wrapped = sorted(n.removeprefix("base_model.model.") for n, m in model.named_modules()
                     if isinstance(m, LoraLayer))
    assert wrapped == sorted(present["vision.q"] + present["connector.vision"])
    stored = load_file(path / "adapter_model.safetensors")
    module = present["vision.q"][0]
    loaded = dict(model.named_parameters())[f"base_model.model.{module}.lora_B.default.weight"]
    assert torch.equal(loaded.to(torch.bfloat16), stored[f"base_model.model.{module}.lora_B.weight"])


def test_cache_reused_and_keyed_on_base_spec_and_source(gemma4, conformer, tmp_path, monkeypatch):
    spec = AdapterSpec("lm", adapters.STANDARD["lm"])
    first = build_adapter(gemma4, spec, root=tmp_path)
    stamp = (first / "adapter_model.safetensors").stat().st_mtime_ns

    def must_not_build(*a):
        raise AssertionError("rebuilt a cached adapter")

    with monkeypatch.context() as m:
        m.setattr(adapters, "_write", must_not_build)
        assert build_adapter(gemma4, spec, root=tmp_path) == first
    assert (first / "adapter_model.safetensors").stat().st_mtime_ns == stamp

    reseeded = build_adapter(gemma4, spec.reseeded(1), root=tmp_path)
    assert reseeded != first and reseeded.name.startswith("lm-")
    a, b = (load_file(p / "adapter_model.safetensors") for p in (first, reseeded))
    assert a.keys() == b.keys() and all(not torch.equal(a[k], b[k]) for k in a)
    assert json.loads((first / "adapter_config.json").read_text())["target_modules"] == \
        json.loads((reseeded / "adapter_config.json").read_text())["target_modules"]
    # Same seed, same values: the draw depends on the spec alone.
    again = build_adapter(gemma4, spec, root=tmp_path / "elsewhere")
    assert all(torch.equal(a[k], v) for k, v in load_file(again / "adapter_model.safetensors").items())

    assert build_adapter(conformer, spec, root=tmp_path) != first  # another config.json
    assert build_adapter(gemma4, AdapterSpec("lm", spec.groups, rank=4), root=tmp_path) != first
    monkeypatch.setattr(adapters, "_source_version", lambda: "edited")
    assert build_adapter(gemma4, spec, root=tmp_path) != first


def test_absent_family_is_refused_with_a_clear_error(gemma4, tmp_path):
    with pytest.raises(ValueError, match=r"audio\.q, audio\.o, absent from .*present: language\.q"):
        build_adapter(gemma4, AdapterSpec("x", ("vision.q", "audio.q", "audio.o")), root=tmp_path)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    with pytest.raises(ValueError, match="unknown module group 'vision.qq'"):
        AdapterSpec("x", ("vision.qq",))
    with pytest.raises(ValueError, match="targets no group"):
        AdapterSpec("x", ())


def test_probes_one_per_present_family(gemma4, present):
    specs = probes(gemma4, seed=2)
    assert [s.name for s in specs] == [f"probe-{f}" for f in present]
    assert all(s.groups == (s.name.removeprefix("probe-"),) and s.seed == 2 for s in specs)


def test_cli_builds_and_prints_the_path(gemma4, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1")
    spec = json.dumps({"name": "cli", "groups": ["connector.vision"], "seed": 4})
    out = subprocess.run([sys.executable, "-m", "fixtures.adapters", "build", str(gemma4), "--spec", spec,
                          "--root", str(tmp_path)], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip().splitlines()[-1])
    assert path.parent == tmp_path and (path / "adapter_config.json").is_file()
    bad = subprocess.run([sys.executable, "-m", "fixtures.adapters", "build", str(gemma4), "--spec",
                          '{"name": "x", "groups": ["audio.q"]}', "--root", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert bad.returncode == 2 and "absent" in bad.stderr
