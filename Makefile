# evoduet_graph — the README's two commands are `make run` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# `make run`: EvoDuet (LLM gate, offline search over the task's docs/) on the embedded model,
# 3-8 minutes on an idle 2-core CPU, up to 15 on one shared with other jobs (figures with the
# machine's load: benchmarks/results/embedded/; the README's "One run explained").
TASK ?= tasks/smoke_polygon_area
ITERATIONS ?= 3
PORT ?= 2024

# What is installed is what the suite ran: the exact versions of requirements/*.lock (`make
# lock` regenerates them from pyproject.toml's ranges). The embedded runtime, llama-cpp-python,
# is built by scripts/build_llama.py: portable by default (runs on any x86-64 CPU, picks its
# CPU kernels at run time); LLAMA_BUILD=native (or EVODUET_LLAMA_BUILD=native) compiles for this
# machine's CPU only.
RUN_LOCK := requirements/run.lock
DEV_LOCK := requirements/dev.lock
LLAMA_BUILD ?= $(or $(EVODUET_LLAMA_BUILD),portable)

.PHONY: run test dev lint clean lock reinstall-llama doctor bench-overhead bench-parallel bench-search

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Installs are stamped so repeated `make` calls do not reinstall; a changed lock file does.
$(VENV)/.llama-$(LLAMA_BUILD): $(RUN_LOCK) scripts/build_llama.py | $(BIN)/python
	rm -f $(VENV)/.llama-*
	EVODUET_LLAMA_BUILD=$(LLAMA_BUILD) $(BIN)/python scripts/build_llama.py $(RUN_LOCK)
	touch $@

$(VENV)/.installed-local: $(RUN_LOCK) pyproject.toml $(VENV)/.llama-$(LLAMA_BUILD)
	$(BIN)/pip install -r $(RUN_LOCK)
	$(BIN)/pip install --no-deps -e .
	touch $@

$(VENV)/.installed-dev: $(DEV_LOCK) pyproject.toml $(VENV)/.llama-$(LLAMA_BUILD)
	$(BIN)/pip install -r $(DEV_LOCK)
	$(BIN)/pip install --no-deps -e .
	touch $@

# Rebuild the embedded runtime (after a crash report, or to switch LLAMA_BUILD).
reinstall-llama: | $(BIN)/python
	rm -f $(VENV)/.llama-*
	$(MAKE) $(VENV)/.llama-$(LLAMA_BUILD)

# Regenerate the lock files from pyproject.toml (needs the registry); run.lock is a subset of
# dev.lock at the same versions.
lock: $(VENV)/.installed-dev
	$(BIN)/uv pip compile -q pyproject.toml --extra local --extra bench --extra build \
	  --extra dev --extra ray --universal --python-version 3.11 -o $(DEV_LOCK)
	$(BIN)/uv pip compile -q pyproject.toml --extra local --extra build --universal \
	  --python-version 3.11 -c $(DEV_LOCK) -o $(RUN_LOCK)

doctor: $(VENV)/.installed-local
	$(BIN)/evoduet doctor

run: $(VENV)/.installed-local
	$(BIN)/evoduet run $(TASK) --iterations $(ITERATIONS) --report

test: $(VENV)/.installed-dev
	LANGGRAPH_STRICT_MSGPACK=true $(BIN)/python -m pytest -ra

# Quality gates (pyproject.toml: [tool.ruff], [tool.mypy]; mkdocs.yml: the documentation site,
# built with --strict so a broken link or anchor fails); `.ci/run` runs them before the tests.
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check evoduet_graph tests benchmarks docs/examples
	$(BIN)/ruff format --check evoduet_graph tests benchmarks docs/examples
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict --site-dir build/site

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
