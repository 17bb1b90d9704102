"""Root conftest: the harness's pytest plugins, for scenarios and tests alike."""
pytest_plugins = ["harness.pytest_options", "harness.plugins.run", "harness.plugins.records",
                  "harness.plugins.report", "harness.pytest_engines", "harness.pytest_card"]
