"""What to try when a bisect gives no answer because an end's engine did not
start: the release's own day (where another was chosen), a pin of the
package that refused the start, or `--fit` of that package."""
from __future__ import annotations

from harness.bisect.search import UNTESTABLE, Answer
from harness.engines.asof import RELEASE_DAY


def startup_ends(answer: Answer) -> dict[str, dict]:
    """The ends whose engine did not start, by version: their start-up error."""
    ends = answer.steps[:2]  # the search judges the two ends first
    return {s.version: s.runs[0].extra["startup"] for s in ends
            if s.label == UNTESTABLE and "startup" in s.runs[0].extra}


def advice(answer: Answer, as_of: str, pins: tuple[str, ...]) -> str | None:
    if not answer.broken_ends:
        return None
    failed = startup_ends(answer)
    if not failed:
        return None
    tries = [] if as_of == RELEASE_DAY else ["each release's own day (leave --as-of out)"]
    packages = sorted({e["package"] for e in failed.values() if e.get("package")})
    for package in packages:
        tries.append(f"--fit {package} (the newest {package} the release allows with which it starts)")
        tries.append(f"--with {package}==VERSION (an older {package})")
    if not packages:
        tries.append("--with pins of the libraries the start-up error names")
    return ", or ".join(tries)
