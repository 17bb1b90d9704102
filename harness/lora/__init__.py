"""LoRA: the module groups adapters target, and what a probe's outputs mean."""
