"""The cross-stack noise profiles of the CPU tier: how far the engine's
answers lie from HF transformers' when nothing is wrong.

- hf-vs-vllm: the tiny Gemma4's reference engine (bfloat16, LoRA on the
  towers and connector) and HF transformers + peft (bfloat16, as the vision
  LoRA family runs it) answer text, image, two images, audio and video
  prompts under no adapter, the lm adapter and the tower adapter.
- the 4-bit path (w4a16, or w4a8 on an AMX host): the engine on
  tiny-gemma4-awq and HF transformers on the model the harness dequantized
  (float32, as the quantized-load family runs it) answer the text prompts,
  32 tokens.
Each prints its figures and the noise_profiles.toml entry they make, and
whether both stacks count the same prompt tokens. Asserts nothing.

usage: .venv/bin/python benchmarks/measure_cross_stack_noise.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _noise import figures, profile_entry
from _tiny import GREEDY_16

from fixtures import media
from harness.checks.noise import four_bit_path
from harness.engines.base import Sampling
from harness.engines.interpreter import EngineInterpreter
from harness.engines.offline import OfflineEngine
from harness.models import models_for
from harness.references.dequantize import dequantize_model
from harness.references.hf import HfReference
from harness.runner.runner import REFERENCE_ARGS
from harness.setup.cpu_features import isa_features
from harness.workloads import lora
from harness.workloads.chat import audio_part, image_part, user, video_part, with_uuids
from harness.workloads.text import text_workload

PROMPTS = {
    "text": user("Write a short story about a lighthouse."),
    "image": user(image_part(media.encode_image(media.image(96, 64, seed=3))), "Describe this picture."),
    "two-images": user(image_part(media.encode_image(media.image(64, 64, seed=1))),
                       image_part(media.encode_image(media.image(128, 80, seed=2))), "Compare."),
    "audio": user(audio_part(media.encode_audio(media.audio_clip(2.0), 16000)), "Transcribe."),
    "video": user(video_part(media.video_frames(4, 96, 64, seed=5)), "What happens?"),
}
QUANTIZED = Sampling(max_tokens=32, ignore_eos=True, logprobs=5)


def entry_of(name: str):
    return next(e for e in models_for("cpu") if e.name == name)


def engine_answers(interpreter, model, args, convs, sampling, adapters=None) -> list:
    with tempfile.TemporaryDirectory() as tmp, \
            OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log") as engine:
        engine.start()
        return [engine.chat([with_uuids(c, f"x{i}")], sampling, adapters=[a] if a else None)[0]
                for i, (c, a) in enumerate(zip(convs, adapters or [None] * len(convs)))]


def report(path: str, pairs: list[tuple], what: str) -> None:
    counts = [(a.prompt_token_count, b.prompt_token_count) for a, b in pairs]
    figs = figures(pairs)
    print(f"{path}: {figs['pairs'] - figs['splits']}/{figs['pairs']} token-equal; {figs['positions']} same-token "
          f"positions before any split: max {figs['max_steps']} bf16 steps; widest margin at a split "
          f"{figs['max_split_margin']} nats ({figs['splits_outside_top_k']} outside top-5); prompt tokens "
          f"{'equal' if all(x == y for x, y in counts) else f'DIFFER: {counts}'}")
    print("noise_profiles.toml:\n" + profile_entry(path, figs, what))


def hf_vs_vllm(interpreter) -> None:
    entry = entry_of("tiny-gemma4")
    model = interpreter.build_tiny_model("gemma4")
    ad = lora.Adapters(model)
    adapters = [None, ad.lm, ad.tower]
    cases = [(k, c, a) for a in adapters for k, c in PROMPTS.items()]
    args = {**entry.engine_args_for(lora.FAMILY), **REFERENCE_ARGS, "max_loras": lora.REFERENCE_MAX_LORAS}
    vllm = engine_answers(interpreter, model, args, [c for _, c, _ in cases], GREEDY_16, [a for *_, a in cases])
    hf = []
    for a in adapters:
        ref = HfReference(model, dtype="bfloat16", adapter=a.path if a else None)
        hf += [ref.chat([c], GREEDY_16)[0] for _, c, b in cases if b == a]
    report("hf-vs-vllm", list(zip(vllm, hf)),
           f"benchmarks/measure_cross_stack_noise.py: tiny Gemma4, {len(cases)} prompts (text, image, two images, "
           f"audio, video; base, lm and tower adapters) x {GREEDY_16.max_tokens} tokens, engine against HF + peft in "
           f"bfloat16")


def four_bit(interpreter) -> None:
    entry = entry_of("tiny-gemma4-awq")
    model = interpreter.build_tiny_model(entry.tiny_arch, overrides=entry.build)
    convs = [r.conversation for r in text_workload().requests]
    vllm = engine_answers(interpreter, model, entry.engine_args, convs, QUANTIZED)
    with tempfile.TemporaryDirectory() as tmp:
        hf = HfReference(dequantize_model(model, tmp)).chat(convs, QUANTIZED)
    report(four_bit_path(isa_features()), list(zip(vllm, hf)),
           f"benchmarks/measure_cross_stack_noise.py: tiny-gemma4-awq, {len(convs)} text prompts x "
           f"{QUANTIZED.max_tokens} tokens, engine against HF on the dequantized model (float32)")


def main() -> None:
    interpreter = EngineInterpreter()
    hf_vs_vllm(interpreter)
    four_bit(interpreter)


if __name__ == "__main__":
    main()
