"""What an engine really did, as its own processes wrote it down.

The in-engine shim (harness/compat/site, switched on by MMHARNESS_OBSERVE)
appends one JSON line per event to a side file per engine:

  {"event": "step", "t": unix_s, "pid": int, "requests": n,
   "tokens": {request_id: scheduled_tokens}, "total_tokens": N,
   "loras": {request_id: adapter_name | null}}   # LoRA engines only; null: base
  {"event": "finished", "t": unix_s, "pid": int,    # requests the scheduler finished
   "requests": [request_id, ...]}                     # (or aborted) since its last step
  {"event": "encoder", "t": unix_s, "pid": int, "modality": "audio"|"image"|"video",
   "items": k, "shapes": [[...], ...],   # each item's input shape
   "container": "list"|"tensor",         # how the call got them: a list of
                                          # tensors, or one padded tensor (then
                                          # each shape's first dim is the item's
                                          # real length, from its mask)
   "tower_lora": {"active": bool,        # tower LoRA engines only: any item
                  "adapters": [name | null, ...]}}  # under an adapter; each item's
  {"event": "lora_modules", "t": unix_s, "pid": int,   # once per worker, at load
   "modules": [vLLM module name, ...],   # every layer the LoRA manager wrapped
   "tower_connector": bool,              # tower/connector LoRA in effect
   "prefixes": {"language"|"tower"|"connector": [module prefix, ...]}}

A step is one model execution with tokens scheduled (empty steps are not
written); an encoder call is one `embed_multimodal` call of the model runner,
so k items in one event went through the encoder together.

Use (every offline and server engine has `engine.observations`):
    offset = engine.observations.mark()    # before the run
    ...run...
    events = engine.observations.since(offset)   # None: not observed

The harness reads a scenario's slice of it: from an offset taken when the
run began to the end of the file when it ended. A missing file means the
engine could not be observed (a remote server, an engine whose internals the
shim does not know); premises then skip with that reason.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from harness.files import read_json_lines

ENV = "MMHARNESS_OBSERVE"


def side_file(log_path: Path) -> Path:
    """Where an engine logging to `log_path` writes its observations."""
    return log_path.with_name(log_path.stem + ".observe.jsonl")


class Observations:
    def __init__(self, path: Path | None):
        self.path = path

    def env(self) -> dict[str, str]:
        """The engine environment that makes its processes write here. The file
        is created now, so an engine that ran nothing reads as observed, empty."""
        if self.path is None:
            return {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        return {ENV: str(self.path)}

    @property
    def available(self) -> bool:
        return self.path is not None and self.path.exists()

    def mark(self) -> int:
        return self.path.stat().st_size if self.available else 0

    def since(self, offset: int) -> list[dict] | None:
        """Events written after `offset`; None when the engine is not observed."""
        if not self.available:
            return None
        return self.read(offset)[0]

    def read(self, offset: int) -> tuple[list[dict], int]:
        """The events of the complete lines written after `offset`, and the
        offset past them (a last line without its newline is being written
        right now: read it next time)."""
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]
        return [event for _, event in read_json_lines(complete).values], offset + len(complete)

    def wait_idle(self, offset: int, timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until the scheduler says (its latest
        `held` event after `offset`) that it runs and waits for nothing: a
        server aborts a request only after its client went away. False when
        it did not within the bound, or is not observed."""
        last: dict | None = None

        def idle(events):
            nonlocal last
            last = next((e for e in reversed(events) if e.get("event") == "held"), last)
            return last is not None and last.get("running") == 0 and last.get("waiting") == 0
        return self._wait_until(offset, timeout_s, idle, poll_s=0.1)

    def wait_steps(self, request: str, steps: int, offset: int, timeout_s: float, *,
                   unless: Callable[[], bool] = lambda: False) -> bool:
        """Wait, up to `timeout_s`, until the engine has run the request
        whose id holds `request` for `steps` steps (`step` events after
        `offset`), or `unless()` says to stop (asked at every look). False
        when it ended first, when the bound passed, when stopped, or when
        the engine is not observed."""
        seen, ended = 0, False

        def run_enough(events):
            nonlocal seen, ended
            for e in events:
                if _names(e, request) and not ended:
                    seen += e.get("event") == "step"
                    ended = e.get("event") in ("finished", "aborted")
            return seen >= steps or ended or unless()
        return self._wait_until(offset, timeout_s, run_enough) and seen >= steps

    def wait_all(self, requests: list[str], offset: int, timeout_s: float, *, ended: bool) -> bool:
        """Wait, up to `timeout_s`, until the engine has run (`ended`: has
        finished or aborted) each request whose id holds one of `requests`
        (events after `offset`). A request run is past the server's
        processing of its prompt."""
        left = set(requests)
        kinds = ("finished", "aborted") if ended else ("step", "finished", "aborted")

        def none_left(events):
            for e in events:
                if e.get("event") in kinds:
                    left.difference_update({r for r in left if _names(e, r)})
            return not left
        return not left or self._wait_until(offset, timeout_s, none_left)

    def wait_batch(self, size: int, offset: int, timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until one step (after `offset`) runs at
        least `size` requests."""
        return self._wait_until(offset, timeout_s, lambda events: any(
            e.get("event") == "step" and e.get("requests", 0) >= size for e in events))

    def _wait_until(self, offset: int, timeout_s: float, done, poll_s: float = 0.005) -> bool:
        """Give `done` the events written after `offset`, a batch at a time
        as they come, until it says so (True), up to `timeout_s` (False;
        also when the engine is not observed)."""
        deadline = time.monotonic() + timeout_s
        while self.available:
            events, offset = self.read(offset)  # only what was written since the last look
            if done(events):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(poll_s)
        return False


def names(engine_id: str, request: str) -> bool:
    """Whether the engine's request id `engine_id` is the request `request`."""
    return f"-{request}-" in f"-{engine_id}-"


def _names(event: dict, request: str) -> bool:
    """The event names the request (a step by its tokens, finished and
    aborted by their requests)."""
    named = event.get("tokens") if event.get("event") == "step" else event.get("requests")
    return any(names(str(r), request) for r in named or ())
