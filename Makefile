# make demo / make test create .venv and install prefixsim on first use, so a fresh clone needs nothing else.
VENV   := .venv
PYTHON := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_WORKERS ?= 2

.PHONY: install demo test test-all bench lint clean

$(STAMP): pyproject.toml
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev,ray]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/prefixsim demo --out results/demo

# The fast lane: lint, format, and every test not marked slow (under 5 minutes on 2 cores).
test: lint
	$(VENV)/bin/pytest -q -n $(PYTEST_WORKERS) -m "not slow"

# Everything, slow end-to-end tests included.
test-all: lint
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
	$(VENV)/bin/ruff check sim workloads tests
	$(VENV)/bin/ruff format --check sim workloads tests

clean:
	rm -rf $(VENV) results/*/
