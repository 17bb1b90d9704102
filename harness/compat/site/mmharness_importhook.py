"""Run a function on a module right after its first import.

The engine shims patch vLLM, but an interpreter start must stay cheap and
must not import vLLM itself: a meta-path finder waits for the module, lets
its real loader execute it, then hands the fresh module to the patches.
Stdlib only; imports nothing heavy.
"""
from __future__ import annotations

import sys

_PENDING: dict[str, list] = {}


class _AfterImport:
    def find_spec(self, name, path=None, target=None):
        if name not in _PENDING:
            return None
        spec = None
        for finder in sys.meta_path:  # the finders that would have answered
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        patches = _PENDING.pop(name)
        real_exec = spec.loader.exec_module

        def exec_then_patch(module):
            real_exec(module)
            for patch in patches:
                patch(module)

        # On this loader instance only (one per spec): the module keeps its
        # real loader, so inspect.getsource and friends still work.
        spec.loader.exec_module = exec_then_patch
        return spec


_FINDER = _AfterImport()


def after_import(module_name: str, patch) -> None:
    """Call patch(module) once the module is imported (now, if it already is)."""
    if module_name in sys.modules:
        patch(sys.modules[module_name])
        return
    _PENDING.setdefault(module_name, []).append(patch)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
