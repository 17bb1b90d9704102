"""The scenario runner: a scenario holds one Runner and asks it for
`batch`, `each_alone`, `concurrent` or `one`; each returns a Run whose
outcomes carry their engine facts."""
from harness.runner.run import EngineUse, Paired, Run, Sent
from harness.runner.runner import Runner

__all__ = ["EngineUse", "Paired", "Run", "Runner", "Sent"]
