"""docs/architecture.md tells the truth where a newcomer reads first: its
tables of plugins, hooks, runner methods and check methods are held to the
code, each both ways (nothing listed that is not there, nothing there that
is not listed)."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from harness.plugins import hookspecs
from harness.runner.check import Check
from harness.runner.runner import Runner

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def table_after(heading: str) -> list[list[str]]:
    """The rows of the first table after a bold heading, as cells."""
    rest = PAGE[PAGE.index(f"**{heading}**"):]
    lines = rest[rest.index("\n|"):].strip().splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return rows[2:]  # header and rule


def names(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def public_methods(cls) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_every_plugin_is_in_the_table_and_the_root_conftest():
    listed = {cell.removesuffix(".py") for row in table_after("Plugins") for cell in names(row[0])}
    conftest = ast.literal_eval(re.search(r"pytest_plugins = (\[.*?\])", (ROOT / "conftest.py").read_text(),
                                          re.S).group(1))
    registered = {p.rsplit(".", 1)[-1] for p in conftest}
    assert listed == registered


def test_no_plugin_imports_another_plugins_module():
    plugins = {p.rsplit(".", 1)[-1] for p in ast.literal_eval(re.search(
        r"pytest_plugins = (\[.*?\])", (ROOT / "conftest.py").read_text(), re.S).group(1))}
    for plugin in plugins:
        tree = ast.parse((ROOT / "harness" / "plugins" / f"{plugin}.py").read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {f"harness.plugins.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module == "harness.plugins" for a in node.names}
        others = {m for m in imported if m.startswith("harness.plugins.")
                  and m.rsplit(".", 1)[-1] in plugins - {plugin}}
        assert not others, f"plugin {plugin} imports {others}"


def test_every_hook_is_in_the_table_with_its_kind():
    rows = {next(iter(names(row[0]))): row[1] for row in table_after("Hooks")}
    specs = {n: f for n, f in vars(hookspecs).items() if n.startswith("pytest_mmharness_")}
    assert set(rows) == set(specs)
    for name, spec in specs.items():
        first = getattr(spec, "pytest_spec", {}).get("firstresult", False)
        assert rows[name] == ("first" if first else "event"), name
        assert all(p.annotation is not inspect.Parameter.empty or p.name == "config"
                   for p in inspect.signature(spec).parameters.values()), f"{name} is not typed"


NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen"]


def ways_to_run() -> set[str]:
    """The Runner's ways to run a workload, read from the code: its public
    methods that take a workload and its sampling (`soak_run` and
    `wave_run` only cut a soak's result into runs)."""
    return {n for n in public_methods(Runner) if "sampling" in inspect.signature(getattr(Runner, n)).parameters}


def test_every_way_to_run_is_in_the_runner_table():
    listed = {n for row in table_after("The runner") for n in names(row[0])}
    assert listed == ways_to_run()


def test_the_pages_count_of_the_ways_is_the_codes():
    said = re.findall(r"\bthe (\w+) ways\b", PAGE)
    assert said, "the page no longer counts the ways: drop this test"
    assert set(said) == {NUMBER_WORDS[len(ways_to_run())]}, said


def test_the_page_names_the_module_that_sends_the_teardown_records():
    """The teardown records go out where `teardown_record` is called."""
    senders = {path.relative_to(ROOT / "harness").as_posix() for path in (ROOT / "harness").rglob("*.py")
               if re.search(r"\bteardown_record\(", path.read_text()) and path.name != "teardown.py"}
    assert senders == {"plugins/engines.py"}, senders
    sentence = PAGE[PAGE.index("`engine_teardown` record per") - 400:PAGE.index("`engine_teardown` record per")]
    assert all(f"`{s}`" in sentence for s in senders), sentence


def test_every_check_method_is_in_the_vocabulary_table():
    listed = {n for row in table_after("The check vocabulary") for n in names(row[0])}
    assert listed == public_methods(Check)


def test_every_scenario_calls_checks_through_the_vocabulary():
    """A scenario's checks are the `check` fixture's methods: no scenario
    calls a library check function of its own."""
    for module in (ROOT / "scenarios").glob("test_*.py"):
        text = module.read_text()
        assert not re.search(r"\b(?:chunks|effects|card)\.check_\w+\(", text), module.name
        used = set(re.findall(r"\bcheck\.(\w+)\(", text))
        assert used <= public_methods(Check), (module.name, used - public_methods(Check))
