"""The harness's pytest plugins. They talk through the hooks in `hookspecs`,
never through each other's module globals."""
