"""What an engine really did, as its own processes wrote it down.

The in-engine shim (harness/compat/site, switched on by MMHARNESS_OBSERVE)
appends one JSON line per event to a side file per engine:

  {"event": "step", "t": unix_s, "pid": int, "requests": n,
   "tokens": {request_id: scheduled_tokens}, "total_tokens": N}
  {"event": "encoder", "t": unix_s, "pid": int, "modality": "audio"|"image"|"video",
   "items": k, "shapes": [[...], ...]}   # each item's input shape

The harness reads a scenario's slice of it: from an offset taken when the
run began to the end of the file when it ended. A missing file means the
engine could not be observed (a remote server, an engine whose internals the
shim does not know); premises then skip with that reason.
"""
from __future__ import annotations

import json
from pathlib import Path

ENV = "MMHARNESS_OBSERVE"


class Observations:
    def __init__(self, path: Path | None):
        self.path = path

    @property
    def available(self) -> bool:
        return self.path is not None and self.path.exists()

    def mark(self) -> int:
        return self.path.stat().st_size if self.available else 0

    def since(self, offset: int) -> list[dict] | None:
        """Events written after `offset`; None when the engine is not observed."""
        if not self.available:
            return None
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read()
        events = []
        for line in data.split(b"\n"):
            if line.strip():
                try:
                    events.append(json.loads(line))
                except ValueError:  # a line being written right now
                    continue
        return events
