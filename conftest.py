"""Root conftest: the harness's pytest plugins, for scenarios and tests alike."""
pytest_plugins = ["harness.plugins.hooks", "harness.plugins.run", "harness.plugins.records",
                  "harness.plugins.report", "harness.plugins.reruns", "harness.plugins.shard",
                  "harness.plugins.matrix", "harness.plugins.engines", "harness.plugins.card",
                  "harness.plugins.preflight", "harness.plugins.progress"]
