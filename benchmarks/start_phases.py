"""Where an engine start's time goes, read from its log: vLLM prefixes each
line with its process, (MainProcess|EngineCore|Worker pid=N), and the time
to the second. Each process's first line comes once its imports are done,
so the gaps between them are mostly imports, one process after another.

Phases (seconds, from the launch to ready):
  main imports        launch → the main process's first line
  main config         → its last line before EngineCore's first (config, multi-modal warm-up)
  core spawn+imports  → EngineCore's first line
  worker spawn+imports→ the model worker's first line
  load, profile, KV   → "init engine (profile, create kv cache, warmup model) took"
  until ready         → the engine answers (the harness's own ready)
"""
from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

LINE = re.compile(r"^\((?P<proc>[A-Za-z]+)(?:-\d+)? pid=\d+\) \w+ (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d)")
INIT_DONE = "init engine (profile, create kv cache, warmup model) took"
PHASES = ("main imports", "main config", "core spawn+imports", "worker spawn+imports", "load, profile, KV",
          "until ready")
ROLES = {"MainProcess": "main", "APIServer": "main", "EngineCore": "core", "Worker": "worker",
         "VllmWorker": "worker"}


def _stamp(text: str, year: int) -> float:
    return dt.datetime.strptime(f"{year}-{text}", "%Y-%m-%d %H:%M:%S").timestamp()


def phases(log: Path, launched: float, ready: float) -> dict[str, float]:
    """The phases of one start whose log is `log`, launched and ready at
    these wall-clock times (time.time())."""
    year = dt.datetime.fromtimestamp(launched).year
    main_first = main_last = core_first = worker_first = init_done = None
    for line in log.read_text(errors="replace").splitlines():
        match = LINE.match(line)
        if not match:
            continue
        role, at = ROLES.get(match["proc"]), _stamp(match["stamp"], year)
        if role == "main":
            main_first = main_first or at
            if core_first is None:
                main_last = at
        elif role == "core":
            core_first = core_first or at
            if INIT_DONE in line:
                init_done = at
        elif role == "worker":
            worker_first = worker_first or at
    marks = [launched, main_first, main_last, core_first, worker_first, init_done, ready]
    if any(m is None for m in marks):
        raise ValueError(f"{log}: not every phase's line was found: {dict(zip(('launch', *PHASES), marks))}")
    return {name: max(0.0, b - a) for name, a, b in zip(PHASES, marks, marks[1:])}
