"""Faults that act in one engine only (harness/compat/site/mmharness_fault_once.py):
the claim, across engines and within one, with the shim's own encoder hook
and no engine (tests/test_flaky_verdict.py runs it inside the real one)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from harness.engines.faults import MARKERS_ENV, ONCE_ENV, fault_env

SITE = Path(__file__).resolve().parents[1] / "harness" / "compat" / "site"


@pytest.fixture
def shim(monkeypatch, tmp_path):
    """The shim's modules as an engine process imports them, with fresh encoder hooks."""
    monkeypatch.syspath_prepend(str(SITE))
    for name in ("mmharness_encoder", "mmharness_fault_once"):
        sys.modules.pop(name, None)
    encoder = importlib.import_module("mmharness_encoder")
    monkeypatch.setattr(encoder, "install", lambda: None)  # no vLLM to wrap here
    monkeypatch.setenv(MARKERS_ENV, str(tmp_path / "markers"))
    yield importlib.import_module("mmharness_fault_once"), encoder
    for name in ("mmharness_encoder", "mmharness_fault_once"):
        sys.modules.pop(name, None)


class Call:
    def __init__(self, ragged: bool):
        self.ragged = ragged


def leak(call, outputs):
    """Acts on ragged calls only, as the padding leak does."""
    return [o + 1 for o in outputs] if call.ragged else outputs


def raising(call):
    if call.ragged:
        raise RuntimeError("mmharness fault: ragged audio batch")


def test_the_first_engine_it_changes_something_in_claims_it(shim, monkeypatch, tmp_path):
    once, encoder = shim
    once.arm("padding-leak", lambda: encoder.AFTER.append(leak))
    [gated] = encoder.AFTER
    monkeypatch.setenv("MMHARNESS_OBSERVE", "engines/01-reference.observe.jsonl")
    assert gated(Call(ragged=False), [1, 2]) == [1, 2]  # no effect here: no claim
    assert not (tmp_path / "markers" / "padding-leak").exists()
    monkeypatch.setenv("MMHARNESS_OBSERVE", "engines/02-batch.observe.jsonl")
    assert gated(Call(ragged=True), [1, 2]) == [2, 3]
    assert gated(Call(ragged=True), [1, 2]) == [2, 3]  # its own engine, every time (each TP rank too)
    assert (tmp_path / "markers" / "padding-leak").read_text() == "engines/02-batch.observe.jsonl"
    monkeypatch.setenv("MMHARNESS_OBSERVE", "engines/03-batch.observe.jsonl")  # the rerun's fresh engine
    assert gated(Call(ragged=True), [1, 2]) == [1, 2]
    assert sorted(p.name for p in (tmp_path / "markers").iterdir()) == ["padding-leak"]  # nothing left behind


def test_a_fault_that_raises_raises_in_one_engine_only(shim, monkeypatch):
    once, encoder = shim
    once.arm("raise-ragged-audio", lambda: encoder.BEFORE.append(raising))
    [gated] = encoder.BEFORE
    monkeypatch.setenv("MMHARNESS_OBSERVE", "engines/01-batch.observe.jsonl")
    with pytest.raises(RuntimeError, match="ragged audio batch"):
        gated(Call(ragged=True))
    monkeypatch.setenv("MMHARNESS_OBSERVE", "engines/02-batch.observe.jsonl")
    gated(Call(ragged=True))


def test_only_faults_on_encoder_calls_can_act_once(shim):
    once, _ = shim
    with pytest.raises(ValueError, match="slow-steps does not act on encoder calls"):
        once.arm("slow-steps", lambda: None)


def test_the_harness_asks_only_for_faults_it_switches_on_with_a_folder_for_their_claims(tmp_path):
    env = fault_env("padding-leak", "media-cross", once=("padding-leak",), markers=tmp_path)
    assert (env[ONCE_ENV], env[MARKERS_ENV]) == ("padding-leak", str(tmp_path))
    assert ONCE_ENV not in fault_env("padding-leak")
    with pytest.raises(ValueError, match="must be among those switched on"):
        fault_env("media-cross", once=("padding-leak",), markers=tmp_path)
    with pytest.raises(ValueError, match="with a folder"):
        fault_env("padding-leak", once=("padding-leak",))
