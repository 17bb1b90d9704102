"""What the fuzzer leaves for each failure it shrank, in a folder of its own:

  workload.json    the shrunk spec, with its cause and first divergence;
  replay.txt       one pytest command that replays it as a check of its own;
  repro.py         a standalone script (vLLM, and the tiny-model builder for
                   a tiny model; no harness import) that a maintainer can
                   attach to an upstream issue as it is;
  collect_env.txt  vLLM's `vllm.collect_env` from the engine's interpreter, to go beside it.
"""
from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

from harness.checks.noise import STEP
from harness.engines.interpreter import engine_cwd
from harness.files import slug
from harness.fuzz.hostile import KINDS
from harness.fuzz.search import Found
from harness.fuzz.space import shape
from harness.models import ROOT, ModelEntry

TEMPLATES = Path(__file__).parent / "templates"
COLLECT_ENV_TIMEOUT_S = 120
REPLAY_TEST = "scenarios/test_fuzz_multimodal.py::test_fuzz_replay"


def replay_command(entry: ModelEntry, spec_path: Path) -> str:
    """The one line that replays a written spec as a check of its own, with
    the harness's interpreter (relative to the checkout, where it lies there)."""
    python = Path(sys.executable)
    shown = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
    return (f"{shlex.quote(str(shown))} -m pytest {shlex.quote(f'{REPLAY_TEST}[{entry.name}]')} "
            f"--tier {entry.tier} --model {shlex.quote(entry.name)} --fuzz-replay {shlex.quote(str(spec_path))}")


def read_spec(path: str | Path) -> dict:
    """A spec written by `write`, or a clear error naming what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        spec = data["spec"]
        if not isinstance(spec, dict) or not isinstance(spec["model"], str) or \
                not (isinstance(spec.get("requests"), list) or spec.get("kind") in KINDS):
            raise ValueError("no batch of requests and no hostile kind")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not a workload the fuzzer wrote ({type(e).__name__}: {e})") from None
    return spec


def write(found: Found, folder: Path, *, entry: ModelEntry, reproduction: dict, engine_env: dict,
          logprob_steps: float, engine: str, python: str, step: str = STEP) -> dict:
    """Write the four files for one shrunk failure; returns their paths and
    the replay command, for the record. `reproduction`: the judge's
    (its template, the conversations and labels, its settings)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "workload.json"
    spec_path.write_text(json.dumps({"cause": found.cause, "message": found.message,
                                     "divergence": found.divergence, "shape": shape(found.spec),
                                     "spec": found.spec}, indent=2), encoding="utf-8")
    command = replay_command(entry, spec_path.resolve())
    (folder / "replay.txt").write_text(command + "\n", encoding="utf-8")
    repro = folder / "repro.py"
    repro.write_text(_script(found, entry, reproduction, engine_env, logprob_steps, engine, step), encoding="utf-8")
    (folder / "collect_env.txt").write_text(_collect_env(python), encoding="utf-8")
    return {"folder": str(folder), "workload": str(spec_path), "replay": command, "repro": str(repro),
            "collect_env": str(folder / "collect_env.txt")}


def vllm_env(env: dict) -> dict:
    """What of an engine's environment a reproducer needs: vLLM's own
    settings and the hub's offline switch (not the harness's shims)."""
    return {k: v for k, v in env.items() if k.startswith("VLLM_") or k == "HF_HUB_OFFLINE"}


def folder_for(root: Path, check_id: str, index: int) -> Path:
    return root / f"{slug(check_id, 80)}-{index}"


def _script(found: Found, entry: ModelEntry, reproduction: dict, engine_env: dict, logprob_steps: float,
            engine: str, step: str) -> str:
    config = {"model": entry.model, "tiny": ({"arch": entry.tiny_arch, "build": entry.build}
                                              if entry.tiny_arch else None),
              "checkout": str(ROOT), "env": engine_env, "labels": reproduction["labels"],
              "logprob_steps": logprob_steps, "logit_grid": step == STEP, **reproduction["config"]}
    blob = base64.b64encode(zlib.compress(json.dumps(reproduction["conversations"]).encode(), 9))
    one_line = " ".join(found.message.split())
    return ((TEMPLATES / reproduction["template"]).read_text(encoding="utf-8")
            .replace("__CAUSE__", found.cause).replace("__MESSAGE__", one_line[:400])
            .replace("__SHAPE__", shape(found.spec)).replace("__ENGINE__", engine)
            .replace("__STEPS__", f"{logprob_steps:g}").replace("__EXPECT__", str(config.get("expect")))
            .replace("__CONFIG__", json.dumps(config, indent=1)).replace("__CONVERSATIONS__", blob.decode()))


def _collect_env(python: str) -> str:
    """vLLM's own environment report from the engine's interpreter (its
    failure is said in the file: the reproducer stands without it)."""
    try:
        # From an empty folder: `-m` puts the working folder first on sys.path.
        out = subprocess.run([python, "-m", "vllm.collect_env"], capture_output=True, text=True,
                             cwd=engine_cwd(), timeout=COLLECT_ENV_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"python -m vllm.collect_env did not run: {e}\n"
    return out.stdout if out.returncode == 0 else f"python -m vllm.collect_env exited {out.returncode}:\n{out.stderr[-3000:]}"
