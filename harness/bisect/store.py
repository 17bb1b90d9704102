"""A bisect's state on disk: what it asks and every outcome so far, written
after each one, so an interrupted bisect resumes where it stopped."""
from __future__ import annotations

import json
import os
from pathlib import Path

from harness.bisect.search import Outcome


class StoreMismatch(ValueError):
    """The folder holds a bisect that asks something else."""


class FileStore:
    def __init__(self, path: Path, question: dict):
        self.path = Path(path)
        self.question = question
        self._runs: dict[str, list[dict]] = {}
        if self.path.is_file():
            state = json.loads(self.path.read_text())
            if state.get("question") != question:
                raise StoreMismatch(
                    f"{self.path} holds another bisect ({state.get('question')}); give this one "
                    f"another folder, or delete that one")
            self._runs = state.get("runs", {})
        else:
            self._write()

    def outcomes(self, version: str) -> list[Outcome]:
        return [Outcome.from_dict(d) for d in self._runs.get(version, [])]

    def add(self, version: str, outcome: Outcome) -> None:
        self._runs.setdefault(version, []).append(outcome.to_dict())
        self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = self.path.with_name(self.path.name + ".tmp")
        staging.write_text(json.dumps({"question": self.question, "runs": self._runs}, indent=1))
        os.replace(staging, self.path)  # never half a state
