"""`StudioContext`: the JSON run context of LangGraph Studio / SDK runs (see `graphs/studio.py`).

A run started from Studio (or any LangGraph SDK client) sends its context as JSON, so the
Studio graph's ``context_schema`` is `StudioContext`: JSON fields only (task folder, run
directory, config overrides, model). On the first node call it builds the real
`evoduet_graph.context.Context` — model, sandboxed evaluator, program store, population,
search backend — with `evoduet_graph.api.build_context`, and caches it for the thread (nodes
resolve it through `evoduet_graph.context.resolve_context`, so they keep reading
``runtime.context``). It lives in its own module so that the server, which loads
``graphs/studio.py`` by file path, and the package share one cache.
"""

from __future__ import annotations

import importlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoduet_graph.context import Context

__all__ = ["StudioContext", "StudioContextError", "load_model_spec"]

DEFAULT_TASK = "tasks/circle_packing_26"
STUDIO_RUNS = Path("runs") / "studio"

_CACHE: dict[str, Context] = {}
_CACHE_LOCK = threading.Lock()


class StudioContextError(ValueError):
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
    from langchain_core.language_models import BaseChatModel

    return obj if isinstance(obj, BaseChatModel) else obj()


def _thread_id() -> str:
    """The LangGraph thread of the run in progress ("default" outside a run)."""
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:
        thread = None
    return str(thread) if thread else "default"


@dataclass(kw_only=True)
class StudioContext:
    """The run context LangGraph Studio sends as JSON; `resolve` builds the real `Context`.

    Attributes:
        task_dir: OpenEvolve task folder (relative paths: to the server's working directory,
            the project root under ``make dev``).
        run_dir: run directory for the program store, events and D_search; default
            ``runs/studio/<thread_id>`` so a thread continued in Studio keeps its population.
            ``evoduet report`` works on it.
        config_file: a YAML config (e.g. one of ``configs/*.yaml``); default: all defaults.
        config: overrides merged into it, as nested keys (``{"gate": {"mode": "llm"}}``).
        model: ``local``, ``openai:<model>`` (overrides ``llm.model``), or
            ``python:<module>:<attribute>`` for a chat model object or factory of your own.
    """

    task_dir: str = field(
        default=DEFAULT_TASK, metadata={"description": "OpenEvolve task folder."}
    )
    run_dir: str | None = field(
        default=None,
        metadata={"description": "Run directory; default runs/studio/<thread_id>."},
    )
    config_file: str | None = field(
        default=None, metadata={"description": "YAML config file, e.g. configs/evoduet.yaml."}
    )
    config: dict[str, Any] = field(
        default_factory=dict,
        metadata={"description": "Config overrides as nested keys, e.g. {\"candidates\": 2}."},
    )
    model: str | None = field(
        default=None,
        metadata={
            "description": "local | openai:<model> | python:<module>:<attribute> (own model)."
        },
    )

    def _key(self, run_dir: Path) -> str:
        return json.dumps(
            [
                str(Path(self.task_dir).resolve()),
                str(run_dir.resolve()),
                self.config_file,
                self.config,
                self.model,
            ],
            sort_keys=True,
            default=str,
        )

    def resolve(self) -> Context:
        """The `Context` for this settings + thread, built on first use and cached.

        Raises:
            StudioContextError: a malformed model spec; TaskError / ConfigError: the task
            folder or configuration is unusable (shown in Studio as the node's error).
        """
        run_dir = Path(self.run_dir) if self.run_dir else STUDIO_RUNS / _thread_id()
        key = self._key(run_dir)
        with _CACHE_LOCK:
            ctx = _CACHE.get(key)
            if ctx is None:
                ctx = self._build(run_dir)
                _CACHE[key] = ctx
        return ctx

    def _build(self, run_dir: Path) -> Context:
        from evoduet_graph.api import RUN_FILE, build_context
        from evoduet_graph.config import EvoDuetConfig, load_config, merge_config
        from evoduet_graph.task import load_task

        task = load_task(self.task_dir)
        base = load_config(self.config_file)
        cfg: EvoDuetConfig = merge_config(base, dict(self.config or {}), "context.config")
        llm = None
        if self.model and self.model.startswith("python:"):
            llm = load_model_spec(self.model)
        elif self.model:
            cfg = cfg.with_overrides({"llm.model": self.model})
        run_dir.mkdir(parents=True, exist_ok=True)
        run_dir = run_dir.resolve()
        (run_dir / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
        meta = {"task_dir": str(task.path), "thread_id": _thread_id(), "studio": True}
        (run_dir / RUN_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")
        ctx = build_context(task, cfg, run_dir, llm=llm)
        ctx.events.emit(
            "run_start",
            task=task.name,
            iterations=cfg.iterations,
            model=cfg.llm.model if llm is None else type(llm).__name__,
            resumed=False,
            studio=True,
        )
        return ctx
