"""Root conftest: the harness's pytest plugins, for scenarios and tests alike."""
pytest_plugins = ["harness.pytest_options", "harness.results.pytest_plugin", "harness.plugins.engines",
                  "harness.plugins.card"]
