"""The engine's interpreter: it runs, has vLLM, and can reach the tier's device."""
from __future__ import annotations

import subprocess
from collections.abc import Sequence

from harness.engines.interpreter import EngineInterpreter, EngineInterpreterError
from harness.engines.supplies import build_shortfalls


def interpreter_problems(interpreter: EngineInterpreter, *, gpu: bool, archs: Sequence[str] = ()) -> list[str]:
    """`archs`: the tiny models the run builds with this interpreter; one it
    cannot build (a package neither it nor the harness has) stops the run
    here, not as an error in every check of that model."""
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
    return build_shortfalls(ident, archs)
