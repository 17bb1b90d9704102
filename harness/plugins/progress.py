"""pytest plugin: progress lines for long runs, through the terminal
reporter: the scenario and model each group of checks begins with, and the
checks done out of the total; each engine start, and its time once it is
ready, failed or is retried; each failed check run again.

    mmharness: [12/357] test_ragged_audio on tiny-gemma4
    mmharness: starting offline engine tiny-gemma4 (engines/03-offline-tiny-gemma4.log)
    mmharness: offline engine tiny-gemma4 ready in 34.2 s
    mmharness: test_batch_invariance[clip0-ragged-tiny-gemma4] failed (mismatch): running it again on fresh engines

Quiet under -q, as pytest's own chatter is. Under xdist the controller
shows xdist's own progress, and each worker, which has no terminal
reporter, writes its lines to the terminal's stderr itself, named by the
worker and without counts (a worker does not know its share in advance):

    mmharness: gw1: test_soak on tiny-gemma4
    mmharness: gw1: starting server engine tiny-gemma4 (engines/gw1-02-server-tiny-gemma4.log)
"""
from __future__ import annotations

import contextlib
import os

import pytest

from harness.engines.pool import EngineStart
from harness.plugins.common import is_check, is_worker, model_entry_of, worker_id


class Progress:
    """`terminal`: the terminal reporter, or None on an xdist worker (`worker`
    names it): its lines go to stderr, which xdist leaves on the terminal."""

    def __init__(self, config: pytest.Config, terminal, total: int, worker: str | None = None):
        self.terminal, self.total, self.worker = terminal, total, worker
        self.capture = config.pluginmanager.get_plugin("capturemanager")
        # pytest writes a letter per check on the module's line (the controller's, under xdist)
        self.dots = config.get_verbosity() <= 0 and terminal is not None
        self.done = 0
        self.group: tuple[str, str | None] | None = None
        # A line of ours ended the module's line of letters while a check ran:
        # its letter needs the module's name again.
        self.reopen = False
        self.running = False

    def line(self, text: str) -> None:
        # An engine starts inside a check's setup, while pytest captures output.
        with self.capture.global_and_fixture_disabled() if self.capture else contextlib.nullcontext():
            if self.terminal is not None:
                self.terminal.write_line(f"mmharness: {text}")  # it ends a line of letters first
            else:  # a new line first: the controller may be amid a line of letters
                os.write(2, f"\nmmharness: {self.worker}: {text}\n".encode())
        self.reopen = self.running and self.dots

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Before the terminal reporter writes a check's letter: the module's
        name again, where a line of ours ended its line."""
        if self.reopen:
            self.reopen = False
            self.terminal.write_fspath_result(report.nodeid, "")

    def check_starts(self, item: pytest.Item) -> None:
        entry = model_entry_of(item)
        group = (item.module.__name__ if item.module else item.nodeid, entry.name if entry else None)
        if group != self.group:
            self.group = group
            on = f" on {group[1]}" if group[1] else ""
            count = f"[{self.done}/{self.total}] " if self.worker is None else ""
            self.line(f"{count}{group[0].rsplit('.', 1)[-1]}{on}")

    def engine_start(self, start: EngineStart) -> None:
        what = f"{start.kind} engine {start.name}" + (" (started ahead)" if start.ahead else "")
        if start.seconds is None:
            self.line(f"starting {what} ({start.log.parent.name}/{start.log.name})")
        else:
            self.line(f"{what} {start.outcome} after {start.seconds:.1f} s" if start.outcome != "ready"
                      else f"{what} ready in {start.seconds:.1f} s")


PROGRESS = pytest.StashKey[Progress]()


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    worker = worker_id(config) if is_worker(config) else None
    terminal = None if worker else config.pluginmanager.get_plugin("terminalreporter")
    if (terminal is not None or worker) and config.get_verbosity() >= 0 and not config.option.collectonly:
        checks = sum(1 for item in session.items if is_check(item))
        if checks:  # the harness's own tests are not a run to follow
            config.stash[PROGRESS] = Progress(config, terminal, checks, worker)
            config.pluginmanager.register(config.stash[PROGRESS], "mmharness-progress")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    progress = item.config.stash.get(PROGRESS, None) if is_check(item) else None
    if progress is not None:
        progress.check_starts(item)
        progress.running = True
    try:
        return (yield)
    finally:
        if progress is not None:
            progress.done += 1
            progress.running = False



def pytest_mmharness_rerun(item: pytest.Item, cause: str, held: list) -> None:
    progress = item.config.stash.get(PROGRESS, None)
    if progress is not None:
        progress.line(f"{item.name} failed ({cause}): running it again on fresh engines")


def pytest_mmharness_engine_start(config: pytest.Config, start: EngineStart) -> None:
    progress = config.stash.get(PROGRESS, None)
    if progress is not None:
        progress.engine_start(start)
