"""Scheduling ahead of the engine's threads, for what must run on time
beside it: the memory samplers' threads, and the client that leaves a
request mid-stream and the core killer (harness.engines.punctual).

An engine on the CPU tier binds every core with spinning OpenMP threads. A
thread at normal priority then waits tens to hundreds of milliseconds for
each wake-up (measured: a sampler at 0.2-13 Hz instead of 100; a leaving
client that saw its request's second step half a second late, after the
engine had finished it), and a sampler preempted while it reads
/proc/<pid>/maps holds the engine's mmap lock and stalls the engine too. A
real-time thread that sleeps between ticks runs as soon as it wakes; it
costs the engine only the tick itself.
"""
from __future__ import annotations

import os
import threading

REALTIME_PRIORITY = 1  # the lowest real-time priority: ahead of every normal thread
NICE = -10


def raise_thread_priority() -> str:
    """Schedule the calling thread ahead of normal ones, as far as this
    process may; returns what it got, for the record. On Linux a pid of 0
    and a thread id name one thread, not the process."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
        return f"SCHED_FIFO {REALTIME_PRIORITY}"
    except (AttributeError, OSError) as e:
        realtime_refused = e
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        return f"nice {NICE}"
    except (AttributeError, OSError):
        pass
    return f"normal (refused SCHED_FIFO and nice {NICE}: {realtime_refused})"
