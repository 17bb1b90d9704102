"""Setting up the harness: the venv (`make setup`) and the CPU feature gate."""
