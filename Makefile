# One-command entry points. `make run` sets up and starts the proxy; `make test` runs the suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# No TIKTOKEN_CACHE_DIR needed offline: the tests rebuild tiktoken's BPE files from rs_bpe.

.PHONY: setup run test lint bench clean

$(BIN)/curator: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[fast,test,postgres]'
	@touch $@

setup: $(BIN)/curator

run: setup
	$(BIN)/curator serve $(ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

bench: setup
	$(BIN)/python -m bench.run $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
