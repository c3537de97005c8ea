# make demo / make test create .venv and install prefixsim on first use, so a fresh clone needs nothing else.
VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_WORKERS ?= 2

.PHONY: install demo test test-all bench lint clean differential

# `make differential`: prefixsim against real vLLM 0.33.0 on fresh random inputs (not part of
# `make test`). The oracle venv lives outside the repository and is created on first use.
ORACLE_VENV ?= $(HOME)/.cache/prefixsim/vllm-oracle-venv
DIFF_CACHE  ?= 2000
DIFF_SYNC   ?= 500
DIFF_ASYNC  ?= 200
DIFF_SEED   ?=

# The compiled modules' sources are prerequisites too: an edited core is rebuilt before tests.
NATIVE_SOURCES := CMakeLists.txt $(wildcard sim/native/src/*) $(wildcard workloads/src/*)

$(STAMP): pyproject.toml $(NATIVE_SOURCES)
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev,ray]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/prefixsim demo --out results/demo

# The fast lane: lint, format, types, and every test not marked slow (under 5 minutes on 2 cores).
test: lint
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) -m "not slow"

# Everything, slow end-to-end tests included.
test-all: lint
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS)

# Dynamo's mocker for the comparison in make bench: its own venv outside the repo, --no-deps.
DYNAMO_VENV ?= $(HOME)/.cache/prefixsim-bench/dynamo-venv
DYNAMO_VERSION ?= 1.6.1

$(DYNAMO_VENV)/.installed:
	test -x $(DYNAMO_VENV)/bin/python || python3 -m venv $(DYNAMO_VENV)
	$(DYNAMO_VENV)/bin/python -m pip install -q --no-deps \
		ai-dynamo-runtime==$(DYNAMO_VERSION) ai-dynamo==$(DYNAMO_VERSION)
	touch $@

bench: $(STAMP) $(DYNAMO_VENV)/.installed
	DYNAMO_PYTHON=$(DYNAMO_VENV)/bin/python $(PYTHON) -m sim.bench $(BENCH)

lint: $(STAMP)
	$(VENV)/bin/ruff check sim workloads tests notebooks
	$(VENV)/bin/ruff format --check sim workloads tests notebooks

clean:
	rm -rf $(VENV) results/*/

differential: $(STAMP)
	tests/differential/make_oracle_venv.sh $(ORACLE_VENV)
	$(PYTHON) tests/differential/run_differential.py --oracle-python $(ORACLE_VENV)/bin/python \
		--cache $(DIFF_CACHE) --sync $(DIFF_SYNC) --async $(DIFF_ASYNC) $(if $(DIFF_SEED),--seed $(DIFF_SEED))
# The CPU offload tier (spec §13) against vLLM 0.33.0: OFFLOAD_STREAMS random op streams for its
# CPUOffloadingManager (LRU and ARC), OFFLOAD_WORKLOADS random workloads for its Scheduler with
# the OffloadingConnector, sync and (OFFLOAD_ASYNC_WORKLOADS) with its AsyncScheduler
# (OFFLOAD_SEED reruns a seed). Part of `make differential`.
.PHONY: differential-offload differential-offload-sched differential-offload-async
OFFLOAD_STREAMS   ?= 1000
OFFLOAD_WORKLOADS ?= 200
OFFLOAD_ASYNC_WORKLOADS ?= 200
differential: differential-offload differential-offload-sched differential-offload-async
differential-offload: $(STAMP)
	tests/differential/make_oracle_venv.sh $(ORACLE_VENV)
	VLLM_ORACLE_VENV=$(ORACLE_VENV) $(if $(OFFLOAD_SEED),SEED=$(OFFLOAD_SEED)) \
		tests/differential/offload/differential_offload.sh $(OFFLOAD_STREAMS)
differential-offload-sched: $(STAMP)
	tests/differential/make_oracle_venv.sh $(ORACLE_VENV)
	VLLM_ORACLE_VENV=$(ORACLE_VENV) $(if $(OFFLOAD_SEED),SEED=$(OFFLOAD_SEED)) \
		tests/differential/offload/differential_offload_sched.sh $(OFFLOAD_WORKLOADS)
differential-offload-async: $(STAMP)
	tests/differential/make_oracle_venv.sh $(ORACLE_VENV)
	ASYNC=1 VLLM_ORACLE_VENV=$(ORACLE_VENV) $(if $(OFFLOAD_SEED),SEED=$(OFFLOAD_SEED)) \
		tests/differential/offload/differential_offload_sched.sh $(OFFLOAD_ASYNC_WORKLOADS)
