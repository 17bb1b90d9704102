"""The sampler interface: a background thread that reads memory figures at a
fixed rate, and the record it leaves (timeline, peaks, marks, achieved rate).

A backend implements `_read()` (one tick: {key: bytes}) and may implement
`_refresh()` (slow bookkeeping such as re-walking a process tree, called
every `refresh_interval_s` on a thread of its own, so a slow walk never
delays a tick). Both threads ask to be scheduled ahead of the engine's
(priority.py); the record says what they got. Keys name what a value measures, e.g.
"engine-rss" or "gpu0-used"; a key missing from a tick means "not known at
that moment", never zero.
"""
from __future__ import annotations

import bisect
import csv
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Iterator

from harness.memory.timeline import downsample

from harness.priority import raise_thread_priority

DEFAULT_RATE_HZ = 100.0
MIN_REFRESH_INTERVAL_S = 0.05
REFRESH_WAIT_S = 10.0  # a mark waits this long at most for the tree as it is now

# Stored in a series where the key had no value at that tick.
_ABSENT = -1


class SamplerUnavailable(RuntimeError):
    """The backend cannot run on this machine; str(exc) is the reason."""


class _Series:
    """Columnar storage: one float array of times and one int array per key,
    so an hour at 100 Hz costs megabytes, not a dict per tick."""

    def __init__(self) -> None:
        self.times = array("d")
        self.values: dict[str, array] = {}

    def append(self, t: float, reading: dict[str, int]) -> None:
        n = len(self.times)
        self.times.append(t)
        for key in reading.keys() - self.values.keys():
            self.values[key] = array("q", [_ABSENT]) * n
        for key, column in self.values.items():
            column.append(int(reading.get(key, _ABSENT)))

    def copy(self) -> "_Series":
        other = _Series()
        other.times = array("d", self.times)
        other.values = {k: array("q", v) for k, v in self.values.items()}
        return other


@dataclass
class SamplerResult:
    """What one sampling run recorded. Times are `time.monotonic()` seconds,
    the same clock `Sampler.mark` and `Sampler.now` return."""

    sampler: str
    rate_hz: float
    started: float
    stopped: float
    started_unix: float
    cpu_seconds: float
    ticks: int
    marks: list[tuple[float, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    _series: _Series = field(default_factory=_Series, repr=False)

    @property
    def duration_s(self) -> float:
        return max(self.stopped - self.started, 0.0)

    @property
    def achieved_hz(self) -> float:
        return self.ticks / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def cpu_fraction(self) -> float:
        """CPU time the sampler's threads used (ticks and refreshes), as a
        fraction of one core."""
        return self.cpu_seconds / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def keys(self) -> list[str]:
        return sorted(self._series.values)

    def samples(self) -> Iterator[tuple[float, dict[str, int]]]:
        for i, t in enumerate(self._series.times):
            yield t, {k: col[i] for k, col in self._series.values.items() if col[i] != _ABSENT}

    @property
    def timeline(self) -> list[tuple[float, dict[str, int]]]:
        return list(self.samples())

    @property
    def peak(self) -> dict[str, int]:
        """Highest value per key over the run (keys never seen are absent)."""
        peaks = {}
        for key, column in self._series.values.items():
            top = max(column, default=_ABSENT)
            if top != _ABSENT:
                peaks[key] = top
        return peaks

    def last(self) -> dict[str, int]:
        """The final sample's reading ({} if there is none)."""
        if not self._series.times:
            return {}
        return {k: col[-1] for k, col in self._series.values.items() if col[-1] != _ABSENT}

    def window(self, t0: float, t1: float) -> "SamplerResult":
        """The samples taken in [t0, t1], as a result of their own (so
        `.peak` is that window's peak); marks inside the window come along."""
        times = self._series.times  # ascending: appended under the sampler's lock
        lo, hi = bisect.bisect_left(times, t0), bisect.bisect_right(times, t1)
        sub = _Series()
        sub.times = times[lo:hi]
        sub.values = {k: col[lo:hi] for k, col in self._series.values.items()}
        n = hi - lo
        return SamplerResult(
            sampler=self.sampler, rate_hz=self.rate_hz,
            started=max(t0, self.started), stopped=min(t1, self.stopped),
            started_unix=self.started_unix + max(t0 - self.started, 0.0),
            # CPU time is not tracked per window; scale it by the share of ticks.
            cpu_seconds=self.cpu_seconds * n / self.ticks if self.ticks else 0.0,
            ticks=n,
            marks=[(t, label) for t, label in self.marks if t0 <= t <= t1],
            notes=list(self.notes), meta=dict(self.meta), _series=sub,
        )

    def between(self, start_label: str, end_label: str) -> "SamplerResult":
        """The window from the first mark named start_label to the first
        later mark named end_label."""
        t0 = next((t for t, lab in self.marks if lab == start_label), None)
        if t0 is None:
            raise KeyError(f"no mark {start_label!r}; marks: {[lab for _, lab in self.marks]}")
        t1 = next((t for t, lab in self.marks if lab == end_label and t >= t0), None)
        if t1 is None:
            raise KeyError(f"no mark {end_label!r} after {start_label!r}")
        return self.window(t0, t1)

    def write_csv(self, path) -> None:
        """The full-resolution timeline, for people (the harness keeps the
        thinned `to_dict()["timeline"]` on the record and never reads this
        back): header `t,<key>,...`, t in seconds from this result's start
        (a window's start, for a window), bytes, empty where unknown."""
        keys = self.keys
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["t", *keys])
            for i, t in enumerate(self._series.times):
                row = [self._series.values[k][i] for k in keys]
                writer.writerow([f"{t - self.started:.4f}", *("" if v == _ABSENT else v for v in row)])

    def to_dict(self, max_points: int | None = 2000) -> dict:
        """JSON-safe record. The timeline is thinned to at most max_points by
        keeping each bucket's maximum, so peaks survive the thinning."""
        timeline = {
            "t": [round(t - self.started, 4) for t in self._series.times],
            "series": {k: [None if v == _ABSENT else v for v in col] for k, col in self._series.values.items()},
        }
        return {
            "sampler": self.sampler,
            "rate_hz": self.rate_hz,
            "achieved_hz": round(self.achieved_hz, 2),
            "cpu_fraction": round(self.cpu_fraction, 5),
            "started_unix": self.started_unix,
            "duration_s": round(self.duration_s, 4),
            "ticks": self.ticks,
            "peak": self.peak,
            "marks": [{"t": t - self.started, "label": label} for t, label in self.marks],
            "notes": list(self.notes),
            "meta": dict(self.meta),
            "timeline": downsample(timeline, max_points) if max_points else timeline,
        }


class Sampler:
    """Background sampling thread. Use:

        sampler.start()
        t0 = sampler.mark("begin test_x")
        ...
        t1 = sampler.mark("end test_x")
        sampler.window(t0, t1).peak     # while still running (shared engine)
        result = sampler.stop()
    """

    name = "sampler"
    # False leaves both threads at normal priority (benchmarks/bench_samplers.py compares).
    raise_priority = True

    def __init__(self, rate_hz: float = DEFAULT_RATE_HZ, refresh_interval_s: float = 0.5):
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be positive, got {rate_hz}")
        self.rate_hz = float(rate_hz)
        self.refresh_interval_s = refresh_interval_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # Refreshes run on the refresh thread only, also those a mark or the
        # start asks for: at normal priority a walk preempted while holding
        # the GIL kept the sampling thread waiting (measured: up to 1.7 s).
        self._refresh_asked = threading.Condition()
        self._asked = self._done = 0
        self._thread: threading.Thread | None = None
        self._refresher: threading.Thread | None = None
        self._series = _Series()
        self._marks: list[tuple[float, str]] = []
        self._notes: list[str] = []
        self._meta: dict = {}
        self._ticks = 0
        # Each thread's own CPU time, written by that thread only (no lock on the tick's path).
        self._tick_cpu = self._refresh_cpu = 0.0
        self._started = self._started_unix = 0.0
        self._error: BaseException | None = None

    # -- backend hooks ----------------------------------------------------
    def _open(self) -> None:
        """Acquire what reading needs; raise SamplerUnavailable if impossible."""

    def _close(self) -> None:
        """Release what _open acquired."""

    def _refresh(self) -> None:
        """Slow bookkeeping, every refresh_interval_s on its own thread; it
        and _read share the backend's state, so guard what both touch."""

    def _read(self) -> dict[str, int]:
        raise NotImplementedError

    def note(self, text: str) -> None:
        """Add a line to the record (once), e.g. why a figure is missing."""
        if text not in self._notes:
            self._notes.append(text)

    # -- public API -------------------------------------------------------
    @staticmethod
    def now() -> float:
        return time.monotonic()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Sampler":
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already started")
        self._open()
        self._refresher = threading.Thread(target=self._refresh_run, name=f"{self.name}-refresh", daemon=True)
        self._refresher.start()
        self._refresh_and_wait()
        self._started, self._started_unix = time.monotonic(), time.time()
        self._tick()  # a first sample before start() returns, so no window is empty
        self._thread = threading.Thread(target=self._run, name=f"{self.name}-thread", daemon=True)
        self._thread.start()
        return self

    def mark(self, label: str) -> float:
        """Take a sample now, of the tree as it is now, and label its
        instant; returns that time, so a window between two marks holds both
        marks' samples."""
        if self._thread is None:
            raise RuntimeError(f"{self.name} is not started")
        self._refresh_and_wait()
        with self._lock:
            t = self._tick_locked()
            self._marks.append((t, label))
        return t

    def window(self, t0: float, t1: float) -> SamplerResult:
        """Samples in [t0, t1] so far, without stopping the sampler."""
        with self._lock:
            return self._result(time.monotonic()).window(t0, t1)

    def stop(self) -> SamplerResult:
        if self._thread is None:
            raise RuntimeError(f"{self.name} was not started")
        self._stopping.set()  # the threads see it within one period
        with self._refresh_asked:
            self._refresh_asked.notify_all()
        self._thread.join()
        self._refresher.join()
        if self._error is None:
            try:
                self._tick()  # a last sample at the moment of stopping
            except Exception as exc:
                self._error = exc
        stopped = time.monotonic()
        self._close()
        if self._error is not None:
            raise RuntimeError(f"{self.name} thread failed") from self._error
        with self._lock:
            return self._result(stopped)

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.running:
            self.stop()

    # -- internals --------------------------------------------------------
    def _result(self, stopped: float) -> SamplerResult:
        return SamplerResult(
            sampler=self.name, rate_hz=self.rate_hz, started=self._started, stopped=stopped,
            started_unix=self._started_unix, cpu_seconds=self._tick_cpu + self._refresh_cpu, ticks=self._ticks,
            marks=list(self._marks), notes=list(self._notes), meta=dict(self._meta), _series=self._series,
        )

    def _tick(self) -> None:
        with self._lock:
            self._tick_locked()

    def _tick_locked(self) -> float:
        reading = self._read()
        t = time.monotonic()
        self._series.append(t, reading)
        self._ticks += 1
        return t

    def _priority(self) -> str:
        return raise_thread_priority() if self.raise_priority else "normal"

    def _refresh_and_wait(self) -> None:
        """Have the refresh thread refresh now, and wait for it (bounded)."""
        with self._refresh_asked:
            self._asked += 1
            asked = self._asked
            self._refresh_asked.notify_all()
            self._refresh_asked.wait_for(lambda: self._done >= asked or not self._refresher.is_alive(),
                                         timeout=REFRESH_WAIT_S)

    def _refresh_run(self) -> None:
        self._meta["refresh_priority"] = self._priority()
        # never a busy loop: this thread may run ahead of every normal one
        interval = max(self.refresh_interval_s, MIN_REFRESH_INTERVAL_S)
        try:
            while True:
                with self._refresh_asked:
                    self._refresh_asked.wait_for(lambda: self._asked > self._done or self._stopping.is_set(),
                                                 timeout=interval)
                    asked = self._asked
                if self._stopping.is_set():
                    break
                self._refresh()
                self._refresh_cpu = time.thread_time()
                with self._refresh_asked:
                    self._done = asked
                    self._refresh_asked.notify_all()
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
            with self._refresh_asked:
                self._refresh_asked.notify_all()

    def _run(self) -> None:
        self._meta["priority"] = self._priority()
        period = 1.0 / self.rate_hz
        deadline, tick_s = time.monotonic(), 0.0
        try:
            while True:
                deadline += period
                delay = deadline - time.monotonic()
                if delay < -period:  # fell far behind: skip missed ticks rather than burst
                    deadline = time.monotonic()
                # Late (waiting for the GIL) or not, rest at least as long as
                # the last tick took: a real-time thread always behind its
                # schedule holds the GIL from the harness's own threads (seen
                # under load at 77 of 100 Hz: a client watching the engine's
                # progress read it 1.8 s late). Then the rate drops instead.
                delay = max(delay, tick_s)
                # time.sleep costs about half the CPU of Event.wait(timeout),
                # the largest share of a tick; stopping waits one period at most
                time.sleep(delay)
                if self._stopping.is_set():
                    break
                began = time.monotonic()
                self._tick()
                tick_s = time.monotonic() - began
                self._tick_cpu = time.thread_time()  # this thread's, since it began
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
