"""HF transformers as a reference runner, the twin of the engine drivers.

One job: greedy generation for chat conversations with HF transformers in
this process, returned as the engines' own record (`Completion`: tokens,
top-k logprobs per position, prompt length, finish reason), so a comparator
takes an engine's answer and this one alike. Text conversations only: the
prompt is the model's chat template rendered with a generation prompt, as
vLLM's chat renders it.
"""
from __future__ import annotations

import sys
from pathlib import Path

from harness.engines.base import Sampling
from harness.engines.results import Completion


class HfReference:
    kind = "hf-transformers"
    # What the record reads of an engine: no log of its own, and it cannot
    # crash apart from the harness.
    log_path = None
    crashed = None

    def __init__(self, model_dir: str | Path, dtype: str = "float32"):
        import torch
        import transformers
        from transformers import AutoModelForImageTextToText, AutoTokenizer

        self.identity = {"distribution": "transformers", "version": transformers.__version__,
                         "torch": torch.__version__, "device": "cpu", "python": sys.executable,
                         "dtype": dtype}
        self.model_dir = Path(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForImageTextToText.from_pretrained(
            self.model_dir, dtype=getattr(torch, dtype)).eval()

    def prompt_ids(self, conversation: list[dict]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def chat(self, conversations: list[list[dict]], sampling: Sampling = Sampling()) -> list[Completion]:
        if sampling.temperature != 0.0:
            raise ValueError("the HF reference is greedy only (temperature 0)")
        return [self._greedy(self.prompt_ids(c), sampling) for c in conversations]

    def _greedy(self, prompt: list[int], sampling: Sampling) -> Completion:
        import torch

        ids = torch.tensor([prompt])
        # ignore_eos: a fixed length, as the engines generate it.
        min_new = sampling.max_tokens if sampling.ignore_eos else 0
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=sampling.max_tokens, min_new_tokens=min_new,
                                      do_sample=False, output_logits=True, return_dict_in_generate=True)
        tokens = out.sequences[0, ids.shape[1]:].tolist()
        logprobs = []
        for step in out.logits:
            values, indices = torch.log_softmax(step[0].float(), dim=-1).topk(sampling.logprobs)
            logprobs.append(dict(zip(indices.tolist(), values.tolist())))
        finish = "length" if len(tokens) == sampling.max_tokens else "stop"
        return Completion(text=self.tokenizer.decode(tokens), token_ids=tokens, logprobs=logprobs,
                          prompt_token_count=len(prompt), finish_reason=finish)
