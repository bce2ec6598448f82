# evoduet_graph — the README's two commands are `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TASK ?= tasks/circle_packing_26
ITERATIONS ?= 5

.PHONY: run test dev lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are stamped so repeated `make` calls do not reinstall; editing pyproject.toml does.
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[local]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[local,bench,dev]'
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/evoduet run $(TASK) --iterations $(ITERATIONS)

test: $(VENV)/.installed-dev
	LANGGRAPH_STRICT_MSGPACK=true $(BIN)/python -m pytest -ra

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check evoduet_graph tests benchmarks

dev: $(VENV)/.installed-dev
	LANGGRAPH_CLI_NO_ANALYTICS=1 $(BIN)/langgraph dev --no-browser --host 127.0.0.1

clean:
	rm -rf $(VENV) build *.egg-info
