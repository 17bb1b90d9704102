"""SIGKILL an engine's core once a batch is in flight, in a process of its
own (harness.engines.punctual says why): as soon as one step holds every
request of the batch, where the engine is observed, else `delay_s` after
it is ready.

    python -m harness.engines.core_killer < spec.json   # prints `ready`, then the outcome

The spec: {"pid": the core's, "observations": the engine's observation
file (null: not observed), "offset": where the batch's events begin,
"requests": the batch's size, "delay_s", "timeout_s": how long to wait for
the batch to be seen in one step before killing anyway}.

The outcome: {"killed_at": time.monotonic() at the kill (one clock for
every process on Linux), "seen_in_one_step"}, or {"killed_at": null,
"error"} when the core was gone already.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from harness.engines.observations import Observations
from harness.engines.punctual import serve


def kill_when_in_flight(spec: dict) -> dict:
    observations = Observations(spec["observations"] and Path(spec["observations"]))
    seen = None
    if observations.available:
        seen = observations.wait_batch(spec["requests"], spec["offset"], spec["timeout_s"])
    else:
        time.sleep(spec["delay_s"])
    killed_at = time.monotonic()
    try:
        os.kill(spec["pid"], signal.SIGKILL)
    except ProcessLookupError as e:
        return {"killed_at": None, "error": f"the core was gone already: {e}"}
    return {"killed_at": killed_at, "seen_in_one_step": seen}


if __name__ == "__main__":
    serve(kill_when_in_flight)
