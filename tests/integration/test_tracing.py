"""Tracing: every model call is a child of its graph node's run.

Tracing: every model call is a child of its graph node's run, named ``<node>.llm``, with
metadata (node, iteration, round, candidate, decision), as a LangSmith trace shows it.

An in-memory tracer stands in for LangSmith and is switched on the way LangSmith is: by an
inheritable configure hook (``LANGSMITH_TRACING=true`` turns on LangChain's own hook), so every
run the graph starts sees it without any change to the run's code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.context import register_configure_hook
from langchain_core.tracers.schemas import Run

from evoduet_graph import EvoDuetConfig, run
from tests.conftest import RADIUS_UP
from tests.fakes import FakeSearcher, KnowledgeResponder, ScriptedChatModel


class MemoryTracer(BaseTracer):
    """Keeps every run it sees (LangSmith's tracer sends them instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def _start_trace(self, run: Run) -> None:
        super()._start_trace(run)
        self.runs.append(run)

    def _persist_run(self, run: Run) -> None:
        pass


_TRACER: ContextVar[MemoryTracer | None] = ContextVar("evoduet_test_tracer", default=None)
register_configure_hook(_TRACER, inheritable=True)


@contextmanager
def tracing() -> Iterator[MemoryTracer]:
    tracer = MemoryTracer()
    token = _TRACER.set(tracer)
    try:
        yield tracer
    finally:
        _TRACER.reset(token)


def test_model_calls_carry_run_name_and_graph_metadata(smoke_task_dir, tmp_path):
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 1,
            "population": {"num_islands": 2},
            "novelty": {"enabled": False},
            "gate": {"mode": "llm"},
            "retrieval": {"inner_rounds": 1, "search_retries": 0},
        }
    )
    llm = ScriptedChatModel(responses=[], default=KnowledgeResponder(generate=RADIUS_UP))
    with tracing() as tracer:
        run(smoke_task_dir, cfg, llm=llm, run_dir=tmp_path / "run", searcher=FakeSearcher())
    runs: list[Any] = tracer.runs
    by_id = {r.id: r for r in runs}
    model_runs = [r for r in runs if r.run_type == "llm"]
    assert {r.name for r in model_runs} == {
        "gate.llm",
        "construct_query.llm",
        "hypothetical_score.llm",
        "generate.llm",
    }
    for r in model_runs:
        node = r.name.removesuffix(".llm")
        assert r.extra["metadata"]["node"] == node
        assert r.extra["metadata"]["iteration"] == 1
        assert f"node:{node}" in r.tags
        parent = by_id.get(r.parent_run_id)
        assert parent is not None and parent.name == node  # the graph node's own run
    [gen] = [r for r in model_runs if r.name == "generate.llm"]
    meta = gen.extra["metadata"]
    assert meta["candidate"] == "it00001-c0" and meta["candidate_index"] == 0
    assert meta["parent"] == "initial" and meta["evidence"] == 3
    [query] = [r for r in model_runs if r.name == "construct_query.llm"]
    assert query.extra["metadata"]["decision"] == "retrieve"
    assert query.extra["metadata"]["round"] == 0
