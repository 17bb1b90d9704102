"""The results options, until the records plugin registers its own."""
from __future__ import annotations


def pytest_addoption(parser):
    g = parser.getgroup("mmharness")
    g.addoption("--results-dir", default=None,
                help="directory for this run's records, results.json and report (default: reports/run-<time>)")
    g.addoption("--baseline", default=None,
                help="results.json of an earlier run to diff against in the report")
    g.addoption("--history", default=None,
                help="append-only run history (default: reports/history.jsonl at the repo root)")
    g.addoption("--memory-diff-pct", type=float, default=10.0,
                help="with --baseline: list memory peaks that moved by more than this percentage")
    g.addoption("--known-issues", default=None,
                help="known-issues TOML registry (default: known_issues.toml at the repo root)")
