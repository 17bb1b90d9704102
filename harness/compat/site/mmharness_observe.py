"""The in-engine observer: with MMHARNESS_OBSERVE=<path>, every engine process
appends what it really did to that file, one JSON line per event, in the
format of harness/engines/observations.py:
  step     - one scheduled model step: requests, tokens per request, total;
  encoder  - one multimodal encoder call: modality, items, each item's shape;
  memory_info, encoder_chunk, vision_chunk - encoder memory (mmharness_memory).
Several processes write the same file: each line is one O_APPEND write.
"""
from __future__ import annotations

import json
import os
import time

import mmharness_encoder
import mmharness_importhook

ENV = "MMHARNESS_OBSERVE"

_fd: int | None = None
_fd_pid: int | None = None


def emit(event: str, **fields) -> None:
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():  # a forked child opens its own
        _fd = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fd_pid = os.getpid()
    line = json.dumps({"event": event, "t": time.time(), "pid": os.getpid(), **fields})
    os.write(_fd, (line + "\n").encode())


def _record_encoder_call(call: mmharness_encoder.EncoderCall) -> None:
    emit("encoder", modality=call.modality, items=len(call.shapes), shapes=call.shapes,
         container=call.container)


def _patch_runner(module) -> None:
    cls = module.GPUModelRunner
    real = cls.execute_model

    def execute_model(self, scheduler_output, *args, **kwargs):
        total = int(scheduler_output.total_num_scheduled_tokens)
        if total:  # an empty step schedules nothing: not a step of the workload
            tokens = {str(k): int(v) for k, v in scheduler_output.num_scheduled_tokens.items()}
            emit("step", requests=len(tokens), tokens=tokens, total_tokens=total)
        return real(self, scheduler_output, *args, **kwargs)

    cls.execute_model = execute_model


def install() -> None:
    """Arm the observer if MMHARNESS_OBSERVE is set; otherwise do nothing."""
    if not os.environ.get(ENV):
        return
    mmharness_importhook.after_import(mmharness_encoder.RUNNER_MODULE, _patch_runner)
    mmharness_encoder.BEFORE.insert(0, _record_encoder_call)  # seen even if a fault raises
    mmharness_encoder.install()
    import mmharness_memory

    mmharness_memory.install()
