# One-command entry points. `make run` sets up and starts the proxy; `make test` runs the suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# What serving needs (the Docker image installs the same); the tests add the `test` extra.
SERVE_EXTRAS := fast,postgres,otel
# No TIKTOKEN_CACHE_DIR needed offline: the tests rebuild tiktoken's BPE files from rs_bpe.

.PHONY: setup run test lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# `make run`: the proxy and its serving extras only.
$(VENV)/.installed-serve: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[$(SERVE_EXTRAS)]'
	@touch $@

# `make setup`, `lint`, `test`, `bench`, `docs`: plus the test extra (pytest, ruff, mypy,
# build, ...), the docs extra (MkDocs with Material: the tests build the site too) and the
# recipes extra (the client libraries README's recipes use: the tests run those recipes).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[$(SERVE_EXTRAS),test,docs,recipes]'
	@touch $@ $(VENV)/.installed-serve

setup: $(VENV)/.installed-test

run: $(VENV)/.installed-serve
	$(BIN)/curator serve $(ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

# The docs site into site/; strict: a broken link or anchor, or a page not in the nav, fails.
docs: setup
	$(BIN)/mkdocs build --strict

bench: setup
	$(BIN)/python -m bench.run $(ARGS)

clean:
	rm -rf $(VENV) site .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
