"""Runs at start-up of every engine process: the harness puts this directory
on PYTHONPATH for engine interpreters, and vLLM's spawned processes inherit it.
Each shim acts only when asked, and lazily (on the first import of what it
patches), so an interpreter start stays cheap:
  - the torchvision shim, where the interpreter needs it (MMHARNESS_TVSHIM=1);
  - the observer, with MMHARNESS_OBSERVE=<path>;
  - the stack dumper (SIGUSR2), with MMHARNESS_STACKS=<folder>;
  - fault switches for the harness's own tests, with MMHARNESS_FAULTS=names;
  - a lesser host's CPU features, with MMHARNESS_ENGINE_KERNELS=level;
  - a noisy host's forward pass, with MMHARNESS_ENGINE_NOISE=scale.
Then the venv's own sitecustomize, where it has one: this one hides it.
"""
import os

if os.environ.get("MMHARNESS_ENGINE_KERNELS"):  # first: before anything imports torch
    import mmharness_kernels

    mmharness_kernels.install()

if os.environ.get("MMHARNESS_TVSHIM") == "1":
    import mmharness_tvshim

    mmharness_tvshim.install()
if os.environ.get("MMHARNESS_STACKS"):  # cheap: faulthandler only
    import mmharness_stacks

    mmharness_stacks.install()
if os.environ.get("MMHARNESS_OBSERVE"):
    import mmharness_observe

    mmharness_observe.install()
if os.environ.get("MMHARNESS_ENGINE_NOISE"):
    import mmharness_noise

    mmharness_noise.install()
if os.environ.get("MMHARNESS_FAULTS"):
    import mmharness_faults

    mmharness_faults.install()


def _chain() -> None:
    """Run the next sitecustomize on sys.path after this folder's, as Python
    would have run it without this one."""
    import importlib.machinery
    import importlib.util
    import sys

    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_chain()
