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
from evoduet_graph.population import ProgramEntry
from evoduet_graph.rundir.store import ProgramRow
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


def add_program(
    env: Env,
    pid: str,
    code: str | None,
    score: float | None,
    iteration: int,
    *,
    parent_id: str | None = "initial",
    error: str | None = None,
    metrics: dict[str, float] | None = None,
) -> None:
    """Store a program; an evaluated one (code and score, no error) also joins the population.

    ``parent_id`` None stores an initial program; ``error`` an invalid candidate.
    """
    generation = 0 if parent_id is None else 1
    env.ctx.store.put_program(
        ProgramRow(
            id=pid,
            code=code,
            parent_id=parent_id,
            iteration=iteration,
            generation=generation,
            kind="initial" if parent_id is None else "rewrite",
            status="invalid" if error else "evaluated",
            score=score,
            valid=error is None,
            error=error,
            metrics=metrics or {},
        )
    )
    if code is not None and score is not None and error is None:
        env.ctx.population.add(
            ProgramEntry(
                id=pid,
                score=score,
                metrics=metrics or {},
                iteration=iteration,
                parent_id=parent_id,
                generation=generation,
                code_length=len(code),
            ),
            code,
            iteration=iteration,
        )
