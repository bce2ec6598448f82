# evoduet_graph — the README's two commands are `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# `make run`: EvoDuet (LLM gate, offline search over the task's docs/) on the embedded model,
# 10-20 minutes on 2 cores: a no-op iteration of the smoke task takes 1.5-2 min, a retrieving
# one (the 3-round inner loop) 5-8 min; several times longer on a machine shared with other jobs
# (figures: benchmarks/results/embedded/).
TASK ?= tasks/smoke_polygon_area
ITERATIONS ?= 3
PORT ?= 2024

.PHONY: run test dev lint clean bench-overhead bench-parallel bench-search

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are stamped so repeated `make` calls do not reinstall; editing pyproject.toml does.
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[local]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[local,bench,dev,ray]'
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/evoduet run $(TASK) --iterations $(ITERATIONS) --report

test: $(VENV)/.installed-dev
	LANGGRAPH_STRICT_MSGPACK=true $(BIN)/python -m pytest -ra

# Quality gates (pyproject.toml: [tool.ruff], [tool.mypy]); `.ci/run` runs them before the tests.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check evoduet_graph tests benchmarks docs/examples
	$(BIN)/ruff format --check evoduet_graph tests benchmarks docs/examples
	$(BIN)/mypy

dev: $(VENV)/.installed-dev
	LANGGRAPH_CLI_NO_ANALYTICS=1 $(BIN)/langgraph dev --no-browser --host 127.0.0.1 --port $(PORT)

# Framework overhead per iteration vs OpenEvolve (instant canned model server, trivial task).
bench-overhead: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/overhead_bench.py

# N=1 vs N=8 candidates per iteration (1 s fake model, 1 s sandboxed evaluator).
bench-parallel: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/parallel_bench.py

# Offline index: cold build time and memory, cache hit, query latency p50/p99 (numpy + scipy docs).
bench-search: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/search_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
