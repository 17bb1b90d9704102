"""The engine's interpreter: it runs, has vLLM, and can reach the tier's device."""
from __future__ import annotations

import subprocess

from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError


def interpreter_problems(interpreter: EngineInterpreter, *, gpu: bool) -> list[str]:
    try:
        ident = interpreter.identity  # the probe; cached for the run
    except EngineInterpreterError as e:
        return [f"engine interpreter: {e}"]
    except (OSError, subprocess.SubprocessError) as e:  # not executable after all, or the probe hung
        return [f"engine interpreter {interpreter.python}: cannot run it: {e}"]
    if gpu and (not ident.get("cuda") or ident.get("device") in (None, "cpu")):
        return [f"GPU tier: the engine interpreter {ident['python']} has {ident['distribution']} "
                f"{ident['version']} on torch {ident['torch']}, which sees no CUDA device; give a "
                f"CUDA build of vLLM with --engine-python"]
    return []
