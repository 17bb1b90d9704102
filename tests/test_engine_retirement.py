"""Engines are retired after the last check that needs them (harness.plugins.retirement)."""
from types import SimpleNamespace

from harness.plugins.retirement import LastCheck, group_by_model, Upcoming, last_checks


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



def test_upcoming_reads_what_this_modules_model_takes_up_later():
    def check(test, model, cell=None, fixtures=()):
        item = _item("cache", test, model)
        if cell:
            item.callspec.params["cell"] = cell
        item.fixturenames, item.originalname = ["runner", *fixtures], test
        return item
    items = [check("premise", "g4", "c1"), check("matches", "g4", "c1", ["references"]), check("premise", "g4", "c2"),
             check("premise", "g3n", "c3", ["load"]), check("matches", "g4", "c2"), check("premise", "g4", "c4"),
             _item("other", "t", "g4")]
    g4, g3n = Upcoming(items, "scenarios/cache.py", "g4"), Upcoming(items, "scenarios/cache.py", "g3n")
    assert g4.after("cell", "c1") == "c2"
    assert g4.after("cell", "c2") == "c4"  # g3n's cell is not g4's
    assert g4.after("cell", "c4") is None and g3n.after("cell", "c3") is None
    assert g4.after("cell", "deselected") is None
    assert g4.uses("references") and not g4.uses("load") and g3n.uses("load")
    assert g4.runs("matches") and not g3n.runs("matches")
