"""Imports run downwards only: a lower layer never imports a higher one
(results never imports report; engines never imports plugins, runner or
scenarios). A module's layer is the one of its longest listed prefix."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Lowest first. Same-layer imports are allowed.
LAYERS = [
    ("harness.units", "harness.files", "harness.children", "harness.priority", "harness.versions", "harness.index",
     "harness.verdicts", "harness.compat"),
    ("harness.memory", "harness.results", "harness.setup"),
    ("harness.engines", "harness.models", "fixtures", "harness.preflight"),
    ("harness.checks", "harness.workloads", "harness.lora", "harness.references", "fixtures.adapters",
     "harness.soak", "harness.cache"),
    ("harness.runner", "harness.report", "harness.bisect", "harness.fuzz", "harness.calibration", "harness.schedule"),
    ("harness.plugins", "harness.__main__"),
    ("scenarios",),
]


def layer_of(module: str) -> int:
    matches = [(len(prefix), index) for index, prefixes in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise LookupError(f"{module} is in no layer: add it to LAYERS")
    return max(matches)[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] in ("harness", "fixtures", "scenarios")]


def upward_imports(paths) -> list[str]:
    found = []
    for path in paths:
        source = module_name(path)
        for line, target in imports(path):
            if layer_of(target) > layer_of(source):
                found.append(f"{path.relative_to(ROOT)}:{line}: {source} imports {target}")
    return found


def our_modules() -> list[Path]:
    paths = [*ROOT.glob("harness/**/*.py"), *ROOT.glob("fixtures/**/*.py"), *ROOT.glob("scenarios/*.py")]
    # The engine processes' start-up shims import nothing of the harness;
    # harness/__init__.py is a docstring.
    return sorted(p for p in paths if "compat/site" not in p.as_posix() and p != ROOT / "harness" / "__init__.py")


def test_no_import_runs_upwards():
    assert upward_imports(our_modules()) == []


def test_an_upward_import_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    bad = tmp_path / "harness" / "results" / "store.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("import json\nfrom harness.report.html import render_report\n")
    assert upward_imports([bad]) == [
        "harness/results/store.py:2: harness.results.store imports harness.report.html"]


def test_every_module_has_a_layer():
    for path in our_modules():
        layer_of(module_name(path))
    with pytest.raises(LookupError, match="harness.newthing is in no layer"):
        layer_of("harness.newthing")


def library_table(doc: str) -> list[str]:
    """The first column's paths of docs/architecture.md's library table."""
    table = doc[doc.index("**Library**"):].split("\n\n")[1]
    return [path for row in table.splitlines()[2:] for path in re.findall(r"`([^`]+)`", row.split("|")[1])]


def test_the_folder_listing_reads_as_the_architecture_page_describes_it():
    named = library_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    gone = [p for p in named if not ((ROOT / p) if p.startswith("fixtures/") else (ROOT / "harness" / p)).exists()]
    assert gone == [], "docs/architecture.md names what is not there"
    children = [c.name for c in (ROOT / "harness").iterdir()
                if c.name not in ("__init__.py", "__main__.py", "__pycache__") and (c.is_dir() or c.suffix == ".py")]
    unnamed = [c for c in children if not any(p.rstrip("/") == c or p.startswith(c.removesuffix(".py") + "/")
                                              or p == c for p in named)]
    assert unnamed == [], "harness/ holds what docs/architecture.md does not describe"


def plugin_modules() -> list[str]:
    """The modules the root conftest registers as pytest plugins."""
    tree = ast.parse((ROOT / "conftest.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytest_plugins" for t in node.targets):
            return [ast.literal_eval(element) for element in node.value.elts]
    raise LookupError("conftest.py sets no pytest_plugins")


def test_no_plugin_imports_another_plugin():
    # Plugins talk through hooks; the helpers they share (common, hookspecs,
    # retirement) are not plugins.
    plugins = set(plugin_modules())
    found = [f"{path.relative_to(ROOT)}:{line}: imports {target}"
             for path in our_modules() for line, target in imports(path)
             if target in plugins and module_name(path) != target]
    assert len(plugins) >= 8 and found == []


def package_of(module: str) -> str:
    """harness.<package> (or the module's top: fixtures, scenarios)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "harness" else parts[0]


def package_cycles(paths) -> list[str]:
    """Pairs of packages that import each other, each import named."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in paths:
        source = module_name(path)
        for line, target in imports(path):
            if package_of(source) != package_of(target):
                edges.setdefault((package_of(source), package_of(target)), []).append(
                    f"{path.relative_to(ROOT)}:{line} imports {target}")
    return [f"{a} <-> {b}: {edges[(a, b)][0]}; {edges[(b, a)][0]}"
            for a, b in sorted(edges) if a < b and (b, a) in edges]


def test_no_two_packages_import_each_other():
    """Within a layer too: the runner does not import the fuzzer that
    imports it, nor the engines the checks that import them."""
    assert package_cycles(our_modules()) == []


def test_a_package_cycle_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for path, text in (("harness/runner/check.py", "from harness.fuzz.search import Search\n"),
                       ("harness/fuzz/judge.py", "import json\nfrom harness.runner.check import Check\n")):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert package_cycles([tmp_path / "harness/runner/check.py", tmp_path / "harness/fuzz/judge.py"]) == [
        "harness.fuzz <-> harness.runner: harness/fuzz/judge.py:2 imports harness.runner.check; "
        "harness/runner/check.py:1 imports harness.fuzz.search"]
