"""A scenario's slice of its engine log: its own file per engine, and an
empty slice says so instead of leaving an empty file."""
from __future__ import annotations

from harness.engines.base import LogWindow
from harness.models import models_for
from harness.runner.facts import write_log_slice
from harness.runner.run import EngineUse


class _Engine:
    def __init__(self, log_path):
        self.log_path = log_path

    def log_since(self, window: LogWindow) -> str:
        return self.log_path.read_bytes()[window.offset:].decode()


def _use(log, label="test_encoder_memory[tiny-gemma4]"):
    engine = _Engine(log)
    return EngineUse("offline", label, models_for("cpu")[0], engine=engine,
                     window=LogWindow(offset=log.stat().st_size, started=0.0))


def test_slices_of_one_scenario_on_two_engines_keep_their_own_lines(tmp_path):
    first, second = tmp_path / "01-offline-a.log", tmp_path / "02-offline-b.log"
    first.write_text("before\n")
    second.write_text("")
    uses = [_use(first), _use(second)]
    with open(first, "a") as f:
        f.write("encoder chunk 2 of 24\n")
    slices = [write_log_slice(tmp_path / "logs", use) for use in uses]
    assert slices[0] != slices[1]
    assert slices[0].read_text() == "encoder chunk 2 of 24\n"
    assert slices[1].read_text().startswith("[the engine wrote nothing to its log during this use")
