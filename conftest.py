"""Root conftest: the harness's pytest plugins, for scenarios and tests alike."""
pytest_plugins = ["harness.plugins.run", "harness.plugins.records", "harness.plugins.report",
                  # before engines: of two trylast hooks, pluggy calls the later registered
                  # last, and engines must note each group's last check after shard deselects
                  "harness.plugins.shard",
                  "harness.plugins.engines", "harness.plugins.card", "harness.plugins.preflight",
                  "harness.plugins.progress"]
