"""pytest plugin: registers the harness's hooks (harness/plugins/hookspecs.py).
The first plugin the root conftest lists, and it does nothing else, so no
other plugin depends on being registered before or after another."""
from __future__ import annotations

import pytest

from harness.plugins import hookspecs


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
