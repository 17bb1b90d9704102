"""Starts ahead planned from a module's declared engines and the checks
still to run (harness.schedule.ahead), and the declarations themselves
(harness.runner.declared): the scenarios declare, the scheduler starts."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engines.pool import EngineSpec
from harness.runner.declared import SAME, Engine, module_engines
from harness.schedule.ahead import next_ahead

ROOT = Path(__file__).resolve().parents[1]


def _check(test, fixtures=(), **params):
    return SimpleNamespace(nodeid=f"scenarios/m.py::{test}", originalname=test, fixturenames=["runner", *fixtures],
                           callspec=SimpleNamespace(params=params))


def _resolve(engine, params):
    """A spec per kind and cell, as Runner.spec_of builds them."""
    if params.get("cell") == "remote":
        return None
    args = engine.args(None, params) if callable(engine.args) else {}
    return EngineSpec("server" if engine.kind == "server" else "offline", "m", "py",
                      {**args, **({"ref": True} if engine.kind == "reference" else {})})


CACHE = (Engine("server", used_by=("cell_args",), args=lambda runner, params: {"cell": params["cell"]}),
         Engine("reference", used_by=("references",)))
CHECKS = [_check("premise", ["cell_args"], cell="c1"), _check("matches", ["cell_args", "references"], cell="c1"),
          _check("premise", ["cell_args"], cell="c2"), _check("matches", ["cell_args", "references"], cell="c2")]


def _key(**args):
    return EngineSpec("server" if "cell" in args else "offline", "m", "py", args).key


def test_the_next_engine_the_checks_need_starts_ahead_of_the_one_being_opened():
    opening = _key(cell="c1")
    assert next_ahead(CACHE, CHECKS, _resolve, busy={opening}.__contains__).args == {"ref": True}
    # the references' engine up (taken over): the next cell's server
    assert next_ahead(CACHE, CHECKS, _resolve, busy={opening, _key(ref=True)}.__contains__).args == {"cell": "c2"}
    everything = {opening, _key(ref=True), _key(cell="c2")}
    assert next_ahead(CACHE, CHECKS, _resolve, busy=everything.__contains__) is None


def test_only_the_engines_the_remaining_checks_use_and_can_start_ahead():
    no_references = [c for c in CHECKS if "references" not in c.fixturenames]
    assert next_ahead(CACHE, no_references, _resolve, busy={_key(cell="c1")}.__contains__).args == {"cell": "c2"}
    remote = [_check("premise", ["cell_args"], cell="remote")]
    assert next_ahead(CACHE, remote, _resolve, busy=lambda key: False) is None
    later = (Engine("server", used_by=("test_hostile",), ahead=False),)
    assert next_ahead(later, [_check("test_hostile")], _resolve, busy=lambda key: False) is None
    by_test = (Engine("server", used_by=("test_hostile",)),)
    assert next_ahead(by_test, [_check("test_hostile")], _resolve, busy=lambda key: False).kind == "server"


def test_a_tp_engine_never_starts_ahead():
    tp2 = (Engine("offline", used_by=("lora_args",), args=lambda runner, params: {"tensor_parallel_size": 2}),)
    assert next_ahead(tp2, [_check("probe", ["lora_args"])], _resolve, busy=lambda key: False) is None


@pytest.mark.parametrize("bad, says", [
    (dict(kind="gpu", used_by=("x",)), "engine kind 'gpu'"),
    (dict(kind="server", used_by="load"), "used_by names the fixtures"),
    (dict(kind="server", used_by=()), "used_by names the fixtures"),
    (dict(kind="server", used_by=("x",), args={"a": 1}), "args is None, SAME or a function"),
])
def test_a_bad_declaration_is_refused(bad, says):
    with pytest.raises(ValueError, match=says):
        Engine(**bad)
    assert module_engines(SimpleNamespace(ENGINES=(Engine("reference", used_by=("x",), args=SAME),)))
    with pytest.raises(TypeError, match="holds what is not an Engine"):
        module_engines(SimpleNamespace(__name__="m", ENGINES=({"kind": "server"},)))


def _scenario_modules():
    return sorted((ROOT / "scenarios").glob("test_*.py"))


def test_scenarios_declare_their_engines_and_never_schedule_them():
    """No scenario starts an engine ahead or reads which checks come later,
    nor imports the scheduler or the engine pool; every module that opens
    engines declares them."""
    for path in _scenario_modules():
        text = path.read_text(encoding="utf-8")
        assert "start_ahead" not in text and "upcoming" not in text, path.name
        imported = [n.module for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.module]
        imported += [a.name for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import) for a in n.names]
        assert not [m for m in imported if m.startswith(("harness.schedule", "harness.engines.pool",
                                                         "harness.engines.devices", "harness.engines.placement"))], path.name
        if "runner." in text and "ENGINES = (" not in text:
            pytest.fail(f"{path.name} opens engines through its runner and declares none (ENGINES)")


def test_a_reference_opens_with_its_calls_own_arguments_so_nothing_unused_starts_ahead():
    """The scheduler resolves a module's other engines (SAME: the opening
    call's arguments) from what the scenario's call gave: were it given
    the reference's (caches off), it would start ahead an offline engine
    with the reference's arguments, which nothing uses (three such starts
    in a make run on 2026-12-07)."""
    import contextlib

    from harness.engines.base import Sampling
    from harness.engines.pool import EngineHandle
    from harness.models import ModelEntry
    from harness.runner import Runner
    from harness.runner.runner import REFERENCE_ARGS
    from harness.workloads.request import Request, Workload

    class Pool:
        interpreter = SimpleNamespace(identity={"version": "0.32.0"}, python="py", tier="cpu")

        def spec(self, kind, model, args=None, env=None, name="engine"):
            return EngineSpec(kind, model, "py", dict(args or {}), dict(env or {}), name)

        def get(self, spec, **kw):
            return EngineHandle(SimpleNamespace(
                chat=lambda convs, sampling, adapters=None: ["answer"] * len(convs), mark=lambda: None,
                observations=None, kind="stub", identity={},
                control=SimpleNamespace(steering=lambda **steer: contextlib.nullcontext())))

    opened = []
    runner = Runner(ModelEntry("cpu", "m", "org/m", frozenset({"text"}), {}), "org/m", "family", Pool(),
                    on_engine=lambda e: None, on_open=lambda spec, call_args: opened.append((spec, call_args)))
    work = Workload("w", (Request("q", [{"role": "user", "content": "hi"}]),))
    card = {"max_num_seqs": 2}
    runner.batch(work, Sampling(max_tokens=1), engine_args=card)
    runner.each_alone(work, Sampling(max_tokens=1), engine_args=card).use
    (batch, batch_call), (reference, reference_call) = opened
    assert batch_call == reference_call == card
    assert reference.args.items() >= REFERENCE_ARGS.items() and not batch.args.items() >= REFERENCE_ARGS.items()
    # What the plugin resolves for the module's offline engine from the reference's opening: the batch's engine.
    assert runner.spec_of("offline", reference_call).key == batch.key
