"""Engines are retired after the last check that needs them, and the checks still
to run are what an engine started ahead serves (harness.schedule.retirement)."""
from types import SimpleNamespace

from harness.schedule.retirement import LastCheck, group_by_model, last_checks, remaining


def _item(module, test, model=None):
    params = {"model_entry": SimpleNamespace(name=model)} if model else {}
    return SimpleNamespace(nodeid=f"scenarios/{module}.py::{test}[{model}]",
                           callspec=SimpleNamespace(params=params))


# The order pytest gave `make run`: its module fixtures interleave the models.
COLLECTED = [
    _item("a", "t1", "g4"), _item("a", "budget"),
    _item("b", "ragged", "g4"), _item("b", "ragged", "g3n"), _item("b", "equal", "g3n"),
    _item("b", "equal", "g4"), _item("b", "load", "g3n"), _item("b", "load", "g4"),
]


def test_each_modules_checks_are_grouped_by_model_in_their_order():
    ordered = [(i.nodeid.split("::")[0][-4:], i.nodeid.split("::")[1]) for i in group_by_model(COLLECTED)]
    assert ordered == [("a.py", "t1[g4]"), ("a.py", "budget[None]"),
                       ("b.py", "ragged[g4]"), ("b.py", "equal[g4]"), ("b.py", "load[g4]"),
                       ("b.py", "ragged[g3n]"), ("b.py", "equal[g3n]"), ("b.py", "load[g3n]")]


def test_a_models_engines_end_at_its_last_check_and_the_modules_at_the_last():
    items = group_by_model(COLLECTED)
    ends = last_checks(items)
    assert ends == {
        "scenarios/a.py::t1[g4]": LastCheck(model="g4"),
        "scenarios/a.py::budget[None]": LastCheck(module=True),
        "scenarios/b.py::load[g4]": LastCheck(model="g4"),
        "scenarios/b.py::load[g3n]": LastCheck(module=True),
    }


def test_the_remaining_checks_are_the_current_modules_of_its_model_from_it_on():
    items = group_by_model(COLLECTED)
    current = items[3]  # b.py::equal[g4]
    assert [i.nodeid for i in remaining(items, current)] == ["scenarios/b.py::equal[g4]", "scenarios/b.py::load[g4]"]
    assert [i.nodeid for i in remaining(items, items[-1])] == ["scenarios/b.py::load[g3n]"]


def test_the_engines_still_needed_are_those_later_checks_declare_resolved_for_their_parameters():
    """A TP size's group keeps the TP 1 reference that the next sizes' checks
    use; an engine of the opening call's arguments (SAME) cannot be known
    before that call and is not kept; a check using neither keeps nothing."""
    from harness.runner.declared import SAME, Engine
    from harness.schedule.retirement import still_needed

    def check(test, fixtures, tp):
        return SimpleNamespace(nodeid=f"scenarios/l.py::{test}[tp{tp}-g4]", originalname=test,
                               fixturenames=["runner", *fixtures], callspec=SimpleNamespace(params={"tp": tp}))
    declared = (Engine("offline", used_by=("lora_args",), args=lambda runner, params: {"tp": params["tp"]}),
                Engine("offline", used_by=("tp1_mixed",), args=lambda runner, params: {"tp": 1, "ref": True}),
                Engine("reference", used_by=("lora_args",), args=SAME))
    resolve = lambda engine, params: SimpleNamespace(key=repr(sorted(engine.args(None, params).items())))  # noqa: E731
    later = [check("test_probe", ["lora_args"], 2), check("test_tp_invariance", ["tp1_mixed", "lora_args"], 2)]
    assert still_needed(declared, later, resolve) == {"[('tp', 2)]", "[('ref', True), ('tp', 1)]"}
    assert still_needed(declared, [check("test_budget", [], 2)], resolve) == set()
    assert still_needed(declared, later, lambda engine, params: None) == set()
