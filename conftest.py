"""Root conftest: the harness's pytest plugins, for scenarios and tests alike."""
pytest_plugins = ["harness.plugins.run", "harness.plugins.records", "harness.plugins.report",
                  "harness.plugins.engines", "harness.plugins.card",
                  # after engines: its collection hook must run before engines' (both trylast)
                  "harness.plugins.shard"]
