"""The zoo's spec builder (fixtures/tiny_models/spec_builder.py) and the
check every zoo build passes against vLLM before it is cached
(fixtures/tiny_models/vllm_check.py), on the zoo's real specs."""
from __future__ import annotations

import copy
import json

import pytest
from safetensors import safe_open

from fixtures import media
from fixtures.tiny_models import ZOO_ARCHS, build_tiny_model, mistral_format
from fixtures.tiny_models.spec_builder import make_tokenizer, resolve_tokens
from fixtures.tiny_models.vllm_check import BuildRefused, check_build
from fixtures.tiny_models.zoo import SPECS


@pytest.fixture(scope="module")
def zoo_dirs() -> dict:
    """Each zoo model in the default cache (built, and checked against vLLM, on first use)."""
    return {arch: build_tiny_model(arch) for arch in ZOO_ARCHS}


def test_a_token_the_tokenizer_lacks_is_refused_not_read_as_unknown():
    tokenizer = make_tokenizer(SPECS["qwen2-audio"])
    assert resolve_tokens({"a": [{"token": "<|AUDIO|>"}], "b": {"token_of": "eos"}}, tokenizer) == \
        {"a": [tokenizer.convert_tokens_to_ids("<|AUDIO|>")], "b": tokenizer.eos_token_id}
    with pytest.raises(ValueError, match="<|AUDIOO|>"):
        resolve_tokens({"audio_token_index": {"token": "<|AUDIOO|>"}}, tokenizer)


# The top-level names of each published checkpoint's weights.
PUBLISHED_PREFIXES = {"qwen2-audio": {"language_model", "audio_tower", "multi_modal_projector"},
                      "qwen2-5-omni": {"thinker"},
                      "audioflamingo3": {"language_model", "audio_tower", "multi_modal_projector"},
                      "granite-speech": {"language_model", "encoder", "projector"},
                      "qwen3-asr": {"model"},
                      "qwen3-omni": {"thinker"},
                      "glmasr": {"language_model", "audio_tower", "multi_modal_projector"},
                      "gemma4-unified": {"model"},
                      "granite-speech-plus": {"language_model", "encoder", "projector"},
                      "qwen2-5-vl": {"model", "visual"},
                      "qwen3-vl": {"model"},
                      "qwen3-vl-moe": {"model"},
                      "idefics3": {"model", "lm_head"},
                      "smolvlm": {"model", "lm_head"},
                      "gemma3": {"language_model", "vision_tower", "multi_modal_projector"},
                      "llava-onevision": {"language_model", "vision_tower", "multi_modal_projector",
                                          "image_newline"},
                      # Mistral's format: its own names, the language model's at the top.
                      "voxtral": {"layers", "tok_embeddings", "norm", "output", "mm_whisper_embeddings"}}
# How HF transformers loads each for a reference: the model class, or its
# thinker (Qwen2.5-Omni's composite wants a speaker file its thinker-only build lacks).
HF_THINKER = {"qwen2-5-omni": ("Qwen2_5OmniThinkerForConditionalGeneration", "thinker_config")}


def test_every_zoo_arch_names_its_published_layout():
    assert set(PUBLISHED_PREFIXES) == set(ZOO_ARCHS)


@pytest.mark.parametrize("arch", ZOO_ARCHS)
def test_weights_carry_the_published_checkpoints_names(zoo_dirs, arch):
    """Transformers 5.19 saved Qwen2-Audio as `language_model.model.model.*`,
    which vLLM does not load: the spec's layout is what is written."""
    weights_file = "consolidated.safetensors" if SPECS[arch].get("format") == "mistral" else "model.safetensors"
    with safe_open(zoo_dirs[arch] / weights_file, "pt") as weights:
        names = list(weights.keys())
    prefixes = {name.split(".")[0] for name in names}
    assert not any(".model.model." in name for name in names), names[:5]
    assert prefixes == PUBLISHED_PREFIXES[arch]


@pytest.mark.parametrize("arch", ZOO_ARCHS)
def test_the_media_change_the_answer(zoo_dirs, arch):
    """Weights shaped so that answers depend on the media: two items of the
    model's first medium, of one size (clips of one length: a sweep, noise;
    images of one size: two seeds), so their prompts are token for token the
    same, give two continuations in HF transformers."""
    import torch
    import transformers

    if SPECS[arch].get("format") == "mistral":  # transformers reads it back through the builder
        model = mistral_format.load_hf_model(zoo_dirs[arch], SPECS[arch], dtype=torch.bfloat16)
        answers = []
        for clip in (media.audio_clip(2.0, kind="sweep", seed=1), media.audio_clip(2.0, kind="noise", seed=2)):
            inputs = mistral_format.hf_processor_inputs(zoo_dirs[arch], [clip], 16000)
            inputs = {key: value.to(torch.bfloat16) if value.is_floating_point() else value
                      for key, value in inputs.items()}
            out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
            answers.append(out[0, inputs["input_ids"].shape[1]:].tolist())
        assert answers[0] != answers[1]
        return
    processor = transformers.AutoProcessor.from_pretrained(zoo_dirs[arch])
    if arch in HF_THINKER:
        name, sub_config = HF_THINKER[arch]
        config = getattr(transformers.AutoConfig.from_pretrained(zoo_dirs[arch]), sub_config)
        model = getattr(transformers, name).from_pretrained(zoo_dirs[arch], config=config, dtype=torch.bfloat16)
    else:
        model = getattr(transformers, SPECS[arch]["classes"]["model"]).from_pretrained(zoo_dirs[arch],
                                                                                       dtype=torch.bfloat16)
    modality = SPECS[arch]["media"][0]
    prompt = processor.apply_chat_template([{"role": "user", "content": [{"type": modality}]}],
                                           add_generation_prompt=True, tokenize=False)
    if modality == "image":
        two_items = [{"images": [media.image(84, 56, seed=seed)]} for seed in (1, 2)]
    else:
        clips = (media.audio_clip(2.0, kind="sweep", seed=1), media.audio_clip(2.0, kind="noise", seed=2))
        two_items = [{"audio": [clip], "sampling_rate": 16000} for clip in clips]
    answers = []
    for items in two_items:
        inputs = processor(text=prompt, **items, return_tensors="pt")
        inputs = {key: value.to(torch.bfloat16) if value.is_floating_point() else value
                  for key, value in inputs.items()}
        out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        answers.append(out[0, inputs["input_ids"].shape[1]:].tolist())
    assert answers[0] != answers[1]


def test_vllm_check_names_the_class_vllm_resolved_when_it_is_not_the_models_own(zoo_dirs):
    with pytest.raises(BuildRefused, match="resolved the build to Qwen2AudioForConditionalGeneration, "
                                           "not the model's own WhisperForConditionalGeneration"):
        check_build(zoo_dirs["qwen2-audio"], "WhisperForConditionalGeneration", ("audio",))


def test_a_build_vllm_cannot_load_is_a_builder_error_and_enters_no_cache(tmp_path, monkeypatch):
    """An architecture vLLM does not register: the build raises with vLLM's
    own words, and nothing is cached."""
    spec = copy.deepcopy(SPECS["qwen2-audio"])
    spec["vllm_architecture"] = "Qwen2AudioForConditionalGeneration"
    monkeypatch.setitem(SPECS, "qwen2-audio", spec)
    original = json.dumps

    def unknown_architecture(obj, *args, **kwargs):  # the saved config names an architecture vLLM lacks
        if isinstance(obj, dict) and obj.get("architectures") == ["Qwen2AudioForConditionalGeneration"]:
            obj = {**obj, "architectures": ["Qwen2AudioForUnheardOf"]}
        return original(obj, *args, **kwargs)
    monkeypatch.setattr(json, "dumps", unknown_architecture)
    with pytest.raises(BuildRefused, match="vLLM does not load the build's config"):
        build_tiny_model("qwen2-audio", cache_root=tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("qwen2-audio")]


def test_the_longest_clip_fills_the_engines_context_where_the_processor_states_none(zoo_dirs):
    """Granite Speech's processor takes clips of any length (a token per
    started 0.1 s): the longest is the one whose tokens fill the engine's
    context, less room for the prompt. Qwen2-Audio's cuts every clip at its
    30 s window (750 tokens): the longest is that window."""
    from harness.workloads.audio import PROMPT_ROOM_TOKENS, audio_tokens, max_audio_seconds, processor

    qwen = str(zoo_dirs["qwen2-audio"])
    assert audio_tokens(processor(qwen), 40 * 16000) == 750  # cut at the window
    assert max_audio_seconds(qwen, 2048) == 30.0
    granite = str(zoo_dirs["granite-speech"])
    longest = max_audio_seconds(granite, 2048)
    assert audio_tokens(processor(granite), round(longest * 16000)) <= 2048 - PROMPT_ROOM_TOKENS < \
        audio_tokens(processor(granite), round((longest + 0.4) * 16000))  # a token per started 0.1 s
