"""`StudioContext`: the JSON run context of Studio / SDK runs.

`StudioContext`: the JSON run context of LangGraph Studio / SDK runs and of runs that name
their task in the graph input (see `graphs/studio.py`).

A run started from Studio (or any LangGraph SDK client) sends its context as JSON, so the
Studio graph's ``context_schema`` is `StudioContext`: JSON fields only (task folder, run
directory, config overrides, model). On the first node call it builds the real
`evoduet_graph.context.Context` — model, sandboxed evaluator, program store, population,
search backend — through the run setup every run shares (`evoduet_graph.driver.open_run`), and
caches it for the thread. It lives in its own module so that the server, which loads
``graphs/studio.py`` by file path, and the package share one cache.

The graph input may carry the same settings (`INPUT_KEYS`: ``task_dir``, ``run_dir``,
``config``), so ``graph.invoke({"task_dir": "tasks/x", "max_iterations": 3})`` needs no
context at all. One resolver, `context_for`, turns ``runtime.context`` and the input's settings
(kept in the graph state) into the run's `Context`; `bind_context` wraps every node and router
of the outer graph with it, so all of them read ``runtime.context``.

Run directories of these runs default to a folder outside the project (`runs_root`), so
that the ``langgraph dev`` file watcher, which reloads the server when a ``.py`` file under
its working directory changes, never sees a run's ``best_program.py``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.config import get_config

from evoduet_graph.config import EvoDuetConfig, deep_merge, load_config, merge_config
from evoduet_graph.context import Context
from evoduet_graph.driver import open_run
from evoduet_graph.errors import UserError
from evoduet_graph.rundir.continuation import check_graph_input_run_dir, hold_run_dir
from evoduet_graph.startup import checked_config
from evoduet_graph.state import GraphInputError, graph_max_iterations
from evoduet_graph.task import load_task

__all__ = [
    "INPUT_KEYS",
    "StudioContext",
    "StudioContextError",
    "bind_context",
    "context_for",
    "input_settings",
    "load_model_spec",
    "runs_root",
]

DEFAULT_TASK = "tasks/circle_packing_26"

CONFIG_ENV = "EVODUET_CONFIG"
"""Environment variable naming the base YAML config of Studio and graph-input runs that name
no ``config_file`` (e.g. ``EVODUET_CONFIG=my.yaml make dev`` to give every Studio thread a
model of your own)."""

RUNS_ENV = "EVODUET_RUNS_DIR"
"""Environment variable overriding `runs_root`."""

INPUT_KEYS = ("task_dir", "run_dir", "config")
"""Graph-input keys that configure a run (also state keys, so a continued thread keeps them)."""

_CACHE: dict[str, Context] = {}
_CACHE_LOCK = threading.Lock()


def runs_root() -> Path:
    """Where Studio and graph-input runs write by default.

    ``$EVODUET_RUNS_DIR``, else ``$XDG_DATA_HOME/evoduet_graph/runs``, else
    ``~/.local/share/evoduet_graph/runs`` — outside the project, so the dev server's file watcher
    does not reload on a new best program.
    """
    env = os.environ.get(RUNS_ENV)
    if env:
        return Path(env).expanduser()
    data = os.environ.get("XDG_DATA_HOME")
    base = Path(data).expanduser() if data else Path.home() / ".local" / "share"
    return base / "evoduet_graph" / "runs"


class StudioContextError(UserError, ValueError):
    """A Studio context names something that cannot be used (bad model spec, task, config)."""


def load_model_spec(spec: str) -> Any:
    """A chat model from a ``python:<module>:<attribute>`` spec.

    The attribute is a LangChain chat model, or a callable with no arguments that returns
    one (e.g. a factory for a custom provider, or a scripted fake in tests).

    Raises:
        StudioContextError: the spec is malformed or does not import.
    """
    target = spec.removeprefix("python:")
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise StudioContextError(
            f"model spec {spec!r} must look like python:<module>:<attribute>, e.g. "
            "python:my_models:make_chat_model"
        )
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise StudioContextError(f"model spec {spec!r} does not import: {exc}") from None
    return obj if isinstance(obj, BaseChatModel) else obj()


def _thread_id() -> str | None:
    """The LangGraph thread of the run in progress (None without a checkpointer's thread)."""
    try:
        thread = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:
        thread = None
    return str(thread) if thread else None


def _default_run_dir(task_dir: str) -> Path:
    """The run directory of a Studio / SDK run.

    ``<runs_root>/threads/<thread_id>`` (a continued thread keeps its population), or a new
    ``<runs_root>/<task>-<timestamp>-<random>`` for a run without a thread.
    """
    thread = _thread_id()
    if thread is not None:
        return runs_root() / "threads" / thread
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return runs_root() / f"{Path(task_dir).name}-{stamp}-{secrets.token_hex(3)}"


@dataclass(kw_only=True)
class StudioContext:
    """The run context LangGraph Studio sends as JSON; `resolve` builds the real `Context`.

    Attributes:
        task_dir: OpenEvolve task folder (relative paths: to the server's working directory,
            the project root under ``make dev``).
        run_dir: run directory for the program store, events and D_search; default
            ``<runs_root()>/threads/<thread_id>`` (outside the project, see `runs_root`), so a
            thread continued in Studio keeps its population; a new folder for a run without a
            thread. ``evoduet report`` works on it; the graph state's ``run_dir`` names it.
        config_file: a YAML config (e.g. one of ``configs/*.yaml``); default:
            ``$EVODUET_CONFIG`` when set, else all defaults (the EvoDuet method).
        config: overrides merged into it, as nested keys (``{"gate": {"mode": "never"}}``).
        model: ``local``, ``openai:<model>`` or any ``<provider>:<model>`` (overrides
            ``llm.model``), or ``python:<module>:<attribute>`` for a chat model object or
            factory of your own.
    """

    task_dir: str = field(default=DEFAULT_TASK, metadata={"description": "OpenEvolve task folder."})
    run_dir: str | None = field(
        default=None,
        metadata={
            "description": "Run directory; default ~/.local/share/evoduet_graph/runs/threads/"
            "<thread_id> ($EVODUET_RUNS_DIR overrides the root)."
        },
    )
    config_file: str | None = field(
        default=None, metadata={"description": "YAML config file, e.g. configs/evoduet.yaml."}
    )
    config: dict[str, Any] = field(
        default_factory=dict,
        metadata={"description": 'Config overrides as nested keys, e.g. {"candidates": 2}.'},
    )
    model: str | None = field(
        default=None,
        metadata={
            "description": "local | openai:<model> | <provider>:<model> (anthropic, "
            "google_genai, ollama, ...) | python:<module>:<attribute> (own model)."
        },
    )

    def _config_file(self) -> str | None:
        return self.config_file or os.environ.get(CONFIG_ENV) or None

    def _key(self, run_dir: Path) -> str:
        return json.dumps(
            [
                str(Path(self.task_dir).resolve()),
                str(run_dir.resolve()),
                self._config_file(),
                self.config,
                self.model,
            ],
            sort_keys=True,
            default=str,
        )

    def resolve(self, settings: Mapping[str, Any] | None = None) -> Context:
        """The `Context` of this context with the graph input's ``settings`` laid over it.

        ``task_dir`` and ``run_dir`` replace the context's, ``config`` overrides are merged over
        the context's (the input wins key by key). The `Context` is built once per settings and
        thread (run directory) and kept in a module cache shared by the threads of the process,
        so every node and router of a run gets the same one.

        Raises:
            StudioContextError: a setting has the wrong type, or a malformed model spec;
            TaskError / ConfigError: the task folder or configuration is unusable (shown in
            Studio as the node's error).
        """
        studio = self._with_input(settings) if settings else self
        run_dir = Path(studio.run_dir).expanduser() if studio.run_dir else None
        if run_dir is None:
            run_dir = _default_run_dir(studio.task_dir)
        key = studio._key(run_dir)
        with _CACHE_LOCK:
            ctx = _CACHE.get(key)
            if ctx is None:
                ctx = studio._build(run_dir)
                _CACHE[key] = ctx
        return ctx

    def _with_input(self, settings: Mapping[str, Any]) -> StudioContext:
        """This context with graph-input settings laid over it (see `resolve`)."""
        changes: dict[str, Any] = {}
        for key in ("task_dir", "run_dir"):
            value = settings.get(key)
            if value is None:
                continue
            if not isinstance(value, str | os.PathLike) or not str(value):
                raise StudioContextError(
                    f"graph input {key!r} must be a folder path (a string), got {value!r}"
                )
            changes[key] = str(value)
        extra = settings.get("config")
        if extra is not None:
            if not isinstance(extra, Mapping):
                raise StudioContextError(
                    "graph input 'config' must be a mapping of config overrides, e.g. "
                    f'{{"gate": {{"mode": "never"}}}}, got {type(extra).__name__}'
                )
            changes["config"] = deep_merge(dict(self.config or {}), dict(extra))
        return replace(self, **changes) if changes else self

    def _build(self, run_dir: Path) -> Context:
        task = load_task(self.task_dir)
        base = load_config(self._config_file())
        cfg: EvoDuetConfig = merge_config(base, dict(self.config or {}), "context.config")
        llm = None
        if self.model and self.model.startswith("python:"):
            llm = load_model_spec(self.model)
        elif self.model:
            cfg = cfg.with_overrides({"llm.model": self.model})
        cfg = checked_config(cfg)
        # the run-directory rules of `evoduet run --out`, before anything is written
        thread = _thread_id()
        notes = check_graph_input_run_dir(run_dir, task, cfg, thread)
        run_dir = hold_run_dir(run_dir)  # created, locked for the life of this process
        return open_run(
            task,
            cfg,
            run_dir,
            model_name=cfg.llm.model if llm is None else type(llm).__name__,
            resumed=True if notes else None,
            notes=notes,
            thread_id=thread,
            studio=True,
            llm=llm,
        )


def input_settings(state: Any) -> dict[str, Any]:
    """The run settings (`INPUT_KEYS`) a graph input put into the state (absent: none)."""
    if not isinstance(state, Mapping):
        return {}
    return {k: state[k] for k in INPUT_KEYS if state.get(k) is not None}


def context_for(value: Any, state: Any) -> Context | None:
    """The run's `Context`: the one resolver of every node and router of the outer graph.

    ``value`` is ``runtime.context``: a `Context` is used as it is (``evoduet_graph.run``, the
    CLI and hand-built contexts; the input settings are then ignored). Otherwise the settings
    of the graph input (`input_settings`) are laid over a `StudioContext` (the one Studio sent,
    or the defaults when no context was passed), which is resolved once
    (`StudioContext.resolve`).

    Returns:
        None when there is neither a context nor a ``task_dir``/``run_dir``/``config`` input
        (a node then raises its "needs a runtime context" error).

    Raises:
        StudioContextError / TaskError / ConfigError: the settings are unusable.
    """
    if isinstance(value, Context):
        return value
    try:
        graph_max_iterations(state, 0)  # a bad input fails before anything is written
    except GraphInputError as exc:
        raise StudioContextError(str(exc)) from None
    settings = input_settings(state)
    if isinstance(value, StudioContext):
        return value.resolve(settings)
    if value is None:
        return StudioContext().resolve(settings) if settings else None
    raise StudioContextError(
        f"the runtime context must be a Context or a StudioContext, got {type(value).__name__}"
    )


def bind_context(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an outer-graph node or router so ``runtime.context`` is the run's `Context`.

    The context is `context_for`'s, built from the graph input when no context was passed. The
    wrapped function receives ``runtime.override(context=ctx)``: nodes, routers and the inner
    loop (which ``query_evolution`` invokes with that context) read ``runtime.context`` and
    never see a `StudioContext`.
    """

    @functools.wraps(fn)
    def wrapped(state: Any, runtime: Any) -> Any:
        ctx = context_for(getattr(runtime, "context", None), state)
        if ctx is not None and ctx is not runtime.context:
            runtime = runtime.override(context=ctx)
        return fn(state, runtime)

    # LangGraph finds a node's subgraph (the inner loop) in the closure of the function
    # ``__wrapped__`` names, one level deep: point it at the innermost node function
    wrapped.__wrapped__ = inspect.unwrap(fn)
    return wrapped
