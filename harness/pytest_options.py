"""Command-line options of the engine, model and card fixtures. The results
and report plugins (harness/plugins/) register their own."""
from __future__ import annotations


def pytest_addoption(parser):
    g = parser.getgroup("mmharness")
    g.addoption("--tier", choices=("cpu", "gpu"), default="cpu",
                help="model matrix tier: cpu (tiny offline builds) or gpu (hub checkpoints)")
    g.addoption("--models-file", default=None,
                help="model matrix TOML (default: models.toml at the repo root)")
    g.addoption("--engine-url", default=None,
                help="run server-kind scenarios against this already running OpenAI-compatible server")
    g.addoption("--engine-python", default=None,
                help="interpreter (or venv) that runs the engine; default: the harness's own")
    g.addoption("--card", default=None,
                help="emulate a smaller GPU card profile, e.g. l4-22g (GPU tier only)")
    g.addoption("--stress", action="store_true", default=False,
                help="also run stress settings (many concurrent requests); on in `make run`")
    g.addoption("--audio-durations", default="1.0,3.5,7.0,12.0",
                help="clip durations in seconds for the ragged-audio batch (comma-separated, must differ)")
    g.addoption("--concurrency", type=int, default=4,
                help="concurrent server requests in the ragged-audio load check")
    g.addoption("--stress-concurrency", type=int, default=16,
                help="concurrent server requests in the stress setting (with --stress)")
