"""Run a scenario module the way `make run` does, for the harness's own tests."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_scenarios(module: str, tmp: Path, *args: str, timeout: float = 1800):
    """Run a scenario module in its own pytest, as `make run` would, and
    return ({check id after '::': record}, the finished process)."""
    from harness.results.run import load_results

    out = subprocess.run([sys.executable, "-m", "pytest", f"scenarios/{module}", "-q",
                          "--results-dir", str(tmp / "run"), "--history", str(tmp / "history.jsonl"),
                          *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    path = tmp / "run" / "results.json"
    assert path.exists(), out.stdout[-3000:] + out.stderr[-3000:]
    return {r.id.split("::", 1)[-1]: r for r in load_results(path).records}, out
