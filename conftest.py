"""Root conftest: registers the harness's pytest plugins for scenarios and tests."""
pytest_plugins = ["harness.pytest_options"]
