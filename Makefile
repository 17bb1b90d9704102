# Two commands on a fresh machine: `make run` (the scenario suite on the CPU
# tier, writing the HTML report) and `make test` (the harness's own tests).
PY ?= python3.11
VENV ?= .venv
VPY := $(VENV)/bin/python
PYTEST := $(VPY) -m pytest
TIER ?= cpu
RUN_ARGS ?=
TEST_ARGS ?=
# The CPU tier never reaches a model hub; the GPU tier may (gated ids read HF_TOKEN).
OFFLINE := $(if $(filter cpu,$(TIER)),HF_HUB_OFFLINE=1)

.PHONY: setup models run test diff bench

setup:
	$(PY) -m harness.setup.venv

# Tiny offline models for the CPU tier (cached; a no-op when current).
models: setup
	$(VPY) -m fixtures.tiny_models build gemma4
	$(VPY) -m fixtures.tiny_models build gemma3n
	$(VPY) -m fixtures.tiny_models build gemma4-awq

# A broken scenario module becomes an error record; the rest still run.
run: setup models
	$(OFFLINE) $(PYTEST) scenarios --tier $(TIER) --stress --continue-on-collection-errors --tb=short \
		$(if $(BASELINE),--baseline=$(BASELINE)) $(RUN_ARGS)

test: setup
	HF_HUB_OFFLINE=1 $(PYTEST) tests $(TEST_ARGS)

# make diff OLD=reports/run-A NEW=reports/latest
diff: setup
	$(VPY) -m harness report diff $(OLD) $(NEW)

bench: setup
	for b in benchmarks/bench_*.py; do $(VPY) $$b || exit 1; done
