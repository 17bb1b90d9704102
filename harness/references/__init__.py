"""Reference runners beside the engine: HF transformers (+ peft), and the bfloat16 model a 4-bit checkpoint means."""
