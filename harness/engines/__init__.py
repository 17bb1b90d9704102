"""Engine drivers: offline (vllm.LLM in a spawned worker), server (the vLLM
OpenAI server in a subprocess) and remote (a server the harness did not start).

Every driver returns the same record types (outcomes.py), so comparators never
care where an output came from. An engine's death is a result, never a hang.
Import the drivers from their modules; this package imports nothing so that
the worker scripts stay runnable under a foreign interpreter.
"""
