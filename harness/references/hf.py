"""HF transformers as a reference runner, the twin of the engine drivers.

One job: greedy generation for chat conversations with HF transformers in
this process, returned as the engines' own record (`Completion`: tokens,
top-k logprobs per position, prompt length, finish reason), so a comparator
takes an engine's answer and this one alike. The prompt is the model's chat
template rendered with a generation prompt, as vLLM's chat renders it.

Conversations are the harness's own (harness/workloads/chat.py): text parts,
and media as `image_url` data URIs, `input_audio` / `audio_url` (decoded,
mixed to mono, resampled to the processor's rate), and `video_url` in vLLM's
`video/jpeg` form (JPEG frames, comma-joined), which vLLM reads as every
frame at 1 fps with no sampling: so does this reference. A conversation with
media goes through the model's AutoProcessor (its chat template, then the
processor on the rendered text with no special tokens added, as vLLM
tokenizes a rendered chat); a text-only one through the tokenizer alone.

`adapter`: a peft LoRA adapter directory (fixtures.adapters) applied on top
of the base with `PeftModel.from_pretrained`.
"""
from __future__ import annotations

import base64
import io
import sys
from pathlib import Path

from harness.engines.base import Sampling
from harness.engines.outcomes import Completion


class HfReference:
    kind = "hf-transformers"
    # What the record reads of an engine: no log of its own, and it cannot
    # crash apart from the harness.
    log_path = None
    crashed = None

    def __init__(self, model_dir: str | Path, dtype: str = "float32", adapter: str | Path | None = None):
        import torch
        import transformers
        from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

        self.identity = {"distribution": "transformers", "version": transformers.__version__,
                         "torch": torch.__version__, "device": "cpu", "python": sys.executable,
                         "dtype": dtype}
        self.model_dir = Path(model_dir)
        self.dtype = getattr(torch, dtype)
        # Everything is read now: the directory may be gone once this returns
        # (the runner's dequantized model lives in a temporary one).
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.processor = AutoProcessor.from_pretrained(self.model_dir)
        model = AutoModelForImageTextToText.from_pretrained(self.model_dir, dtype=self.dtype)
        self.adapter = Path(adapter) if adapter is not None else None
        if self.adapter is not None:
            import peft
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter)
            self.identity |= {"peft": peft.__version__, "adapter": str(self.adapter)}
        self.model = model.eval()

    def prompt_ids(self, conversation: list[dict]) -> list[int]:
        return self.inputs(conversation)["input_ids"][0].tolist()

    def inputs(self, conversation: list[dict]) -> dict:
        """The model's inputs for one conversation (batch of one, torch tensors):
        input_ids, attention_mask and whatever the processor adds for its media."""
        import torch

        messages, media = _hf_messages(conversation, self._sampling_rate)
        if not any(media.values()):
            ids = self.tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=True)
            ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
            return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        text = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        kwargs = {}
        if media["images"]:
            kwargs["images"] = media["images"]
        if media["audio"]:
            kwargs["audio"] = media["audio"]
        if media["videos"]:
            kwargs |= {"videos": [v for v, _ in media["videos"]],
                       "video_metadata": [m for _, m in media["videos"]], "do_sample_frames": False}
        out = self.processor(text=text, add_special_tokens=False, return_tensors="pt", **kwargs)
        return {k: (v.to(self.dtype) if torch.is_tensor(v) and v.is_floating_point() else v)
                for k, v in out.items()}

    @property
    def _sampling_rate(self) -> int:
        extractor = getattr(self.processor, "feature_extractor", None)
        return getattr(extractor, "sampling_rate", 16000)

    def chat(self, conversations: list[list[dict]], sampling: Sampling = Sampling(),
             forced: list[list[int]] | None = None) -> list[Completion]:
        """`forced`: per conversation, token ids appended to its prompt (a
        comparator following this stack past a split), as the engine's
        offline driver takes them."""
        if sampling.temperature != 0.0:
            raise ValueError("the HF reference is greedy only (temperature 0)")
        forced = forced or [None] * len(conversations)
        return [self._greedy(_extended(self.inputs(c), f or []), sampling) for c, f in zip(conversations, forced)]

    def _greedy(self, inputs: dict, sampling: Sampling) -> Completion:
        import torch

        ids = inputs["input_ids"]
        # ignore_eos: a fixed length, as the engines generate it.
        min_new = sampling.max_tokens if sampling.ignore_eos else 0
        with torch.no_grad():
            out = self.model.generate(**inputs, max_new_tokens=sampling.max_tokens, min_new_tokens=min_new,
                                      do_sample=False, output_logits=True, return_dict_in_generate=True)
        tokens = out.sequences[0, ids.shape[1]:].tolist()
        logprobs = []
        for step in out.logits:
            values, indices = torch.log_softmax(step[0].float(), dim=-1).topk(sampling.logprobs)
            logprobs.append(dict(zip(indices.tolist(), values.tolist())))
        finish = "length" if len(tokens) == sampling.max_tokens else "stop"
        return Completion(text=self.tokenizer.decode(tokens), token_ids=tokens, logprobs=logprobs,
                          prompt_token_count=ids.shape[1], finish_reason=finish)


def _extended(inputs: dict, tokens: list[int]) -> dict:
    """The inputs with `tokens` appended as text: the ids, their attention,
    and (where the processor gives one) their token type, text's 0."""
    if not tokens:
        return inputs
    import torch

    ids = inputs["input_ids"]
    extra = torch.tensor([tokens], dtype=ids.dtype)
    out = dict(inputs, input_ids=torch.cat([ids, extra], dim=1))
    for key, fill in (("attention_mask", 1), ("mm_token_type_ids", 0), ("token_type_ids", 0)):
        if key in inputs:
            out[key] = torch.cat([inputs[key], torch.full_like(extra, fill, dtype=inputs[key].dtype)], dim=1)
    return out


# vLLM reads a `video/jpeg` data URL as every frame at this rate, unsampled.
VIDEO_JPEG_FPS = 1.0


def _data_url_bytes(url: str) -> tuple[str, str]:
    """(media type, base64 payload) of a data URL."""
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError(f"the HF reference takes media as base64 data URLs only, got {url[:40]!r}")
    head, payload = url[len("data:"):].split(";base64,", 1)
    return head, payload


def _image(url: str):
    from PIL import Image

    _, payload = _data_url_bytes(url)
    return Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB")


def _audio(data: bytes, rate: int):
    import numpy as np
    import soundfile

    samples, sr = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    samples = samples.mean(axis=1)
    if sr != rate:  # linear interpolation; the harness's clips are at the processor's rate
        n = int(round(len(samples) * rate / sr))
        samples = np.interp(np.arange(n) * sr / rate, np.arange(len(samples)), samples).astype(np.float32)
    return samples


def _video(url: str):
    import numpy as np
    from PIL import Image

    mime, payload = _data_url_bytes(url)
    if mime.lower() != "video/jpeg":
        raise ValueError(f"the HF reference takes video as vLLM's video/jpeg frame list only, got {mime!r}")
    frames = np.stack([np.asarray(Image.open(io.BytesIO(base64.b64decode(f))).convert("RGB"))
                       for f in payload.split(",")])
    n = len(frames)
    return frames, {"fps": VIDEO_JPEG_FPS, "total_num_frames": n, "frames_indices": list(range(n)),
                    "duration": n / VIDEO_JPEG_FPS}


def _hf_messages(conversation: list[dict], rate: int) -> tuple[list[dict], dict]:
    """The conversation with media parts as the HF chat template's placeholders
    ({"type": "image"} ...), and the decoded media in order of appearance."""
    media = {"images": [], "audio": [], "videos": []}
    messages = []
    for message in conversation:
        content = message.get("content")
        if not isinstance(content, list):
            messages.append(message)
            continue
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "image_url":
                media["images"].append(_image(part["image_url"]["url"]))
                parts.append({"type": "image"})
            elif kind == "input_audio":
                media["audio"].append(_audio(base64.b64decode(part["input_audio"]["data"]), rate))
                parts.append({"type": "audio"})
            elif kind == "audio_url":
                media["audio"].append(_audio(base64.b64decode(_data_url_bytes(part["audio_url"]["url"])[1]), rate))
                parts.append({"type": "audio"})
            elif kind == "video_url":
                media["videos"].append(_video(part["video_url"]["url"]))
                parts.append({"type": "video"})
            elif kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            else:
                raise ValueError(f"the HF reference cannot read a content part of type {kind!r}")
        messages.append({**message, "content": parts})
    return messages, media
