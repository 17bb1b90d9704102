"""LoRA: the module families adapters target, and what a probe's outputs mean."""
