"""The stack dumper: with MMHARNESS_STACKS=<folder>, every engine process
registers faulthandler on SIGUSR2, writing every thread's Python stack to
<folder>/stacks-<pid>.txt. faulthandler writes from its C signal handler,
so a process stuck in a loop or in native code still answers. vLLM uses
no SIGUSR2 of its own. A forked child registers its own file."""
from __future__ import annotations

import faulthandler
import os
import signal

ENV = "MMHARNESS_STACKS"
SIGNAL = signal.SIGUSR2

_file = None


def _register() -> None:
    global _file
    folder = os.environ[ENV]
    os.makedirs(folder, exist_ok=True)
    # Kept open for the process's life: faulthandler writes to its descriptor.
    _file = open(os.path.join(folder, f"stacks-{os.getpid()}.txt"), "w")
    faulthandler.register(SIGNAL, file=_file, all_threads=True, chain=False)


def install() -> None:
    if not os.environ.get(ENV):
        return
    _register()
    os.register_at_fork(after_in_child=_register)
