"""A real `Context` for calling graph nodes directly in unit tests.

`make_env` builds the context on a task folder (in memory unless ``run_dir`` is given) with a
`ScriptedChatModel` and a `FakeSearcher` injected, and by default runs ``initialize`` +
``select`` once so the store and population are seeded; ``seeded=False`` leaves both empty
(to test those two nodes themselves). Config overrides are keyword arguments (``seed=7``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langgraph.runtime import Runtime

from evoduet_graph import EvoDuetConfig, build_context, load_task
from evoduet_graph.context import Context
from evoduet_graph.nodes.initialize import initialize
from evoduet_graph.nodes.select import select
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel

BASE: dict[str, Any] = {
    "iterations": 3,
    "population": {"num_islands": 2},
    "evaluation": {"workers": 1},
    "retrieval": {"search_retries": 0},
}


@dataclass
class Env:
    """A context and the outer state.

    After ``initialize`` + ``select`` when seeded, else ``{"max_iterations": ...}`` only.
    """

    ctx: Context
    runtime: Runtime[Context]
    llm: ScriptedChatModel
    searcher: Any
    state: dict[str, Any]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.ctx.events.memory if e["event"] == name]


def make_env(
    task_dir,
    *,
    responder: Any = None,
    llm: ScriptedChatModel | None = None,
    searcher: Any = None,
    evaluator: Any = None,
    run_dir: Any = None,
    seeded: bool = True,
    **overrides: Any,
) -> Env:
    """Build the context on ``task_dir``; with ``seeded`` run ``initialize`` + ``select`` once.

    ``overrides`` are dotted config keys with ``__`` for dots (``gate__mode="llm"``);
    ``evaluator`` None is the task's sandboxed evaluator.
    """
    cfg = EvoDuetConfig.model_validate(BASE).with_overrides(
        {k.replace("__", "."): v for k, v in overrides.items()}
    )
    llm = llm or ScriptedChatModel(responses=[], default=responder or KnowledgeResponder())
    searcher = searcher if searcher is not None else FakeSearcher()
    ctx = build_context(
        load_task(task_dir), cfg, run_dir, llm=llm, evaluator=evaluator, searcher=searcher
    )
    runtime = Runtime(context=ctx)
    state: dict[str, Any] = {"max_iterations": cfg.iterations}
    if seeded:
        state.update(initialize(state, runtime))
        state.update(select(state, runtime))
    return Env(ctx=ctx, runtime=runtime, llm=llm, searcher=searcher, state=state)
