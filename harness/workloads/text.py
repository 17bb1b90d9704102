"""Text-only workloads: prompts any model of the matrix can answer."""
from __future__ import annotations

from harness.workloads.request import Request, Workload

PROMPTS = {"story": "Tell me a short story about the sea.",
           "list": "List three colours and one animal for each.",
           "recipe": "How do I bake bread at home?",
           "numbers": "Count from one to twenty in words."}


def text_workload() -> Workload:
    reqs = tuple(Request(label, [{"role": "user", "content": text}], {"chars": len(text)})
                 for label, text in PROMPTS.items())
    return Workload("text", reqs, {"workload": {r.label: r.facts for r in reqs}})
