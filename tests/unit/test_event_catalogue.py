"""Events as a catalogue, with the same fields in both sinks.

Events as a catalogue: every event the package writes is named in one module, and an event
written to both sinks carries the same fields in both.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evoduet_graph.nodes._common import emit, emit_progress
from evoduet_graph.rundir.events import EVENTS, EventLog, SearchPayload, check_event

PACKAGE = Path(__file__).resolve().parents[2] / "evoduet_graph"


def _emit_calls() -> list[tuple[list[str], list[str], str]]:
    """Every emit call of the package: (event names, keyword fields, where)."""
    calls = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            args = {"emit": node.args, "emit_progress": node.args[1:]}.get(name or "", [])
            if name == "emit" and len(node.args) >= 3:  # emit(ctx, runtime, event, ...)
                args = node.args[2:]
            for arg in args[:1]:
                events = [
                    c.value
                    for c in ast.walk(arg)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
                keywords = [k.arg for k in node.keywords if k.arg is not None]
                calls.append((events, keywords, f"{path.name}:{node.lineno}"))
    return calls


def _emitted_names() -> set[str]:
    return {name for events, _, _ in _emit_calls() for name in events}


def test_every_emitted_event_is_in_the_catalogue() -> None:
    emitted = _emitted_names()
    assert len(emitted) > 30
    assert emitted <= set(EVENTS), sorted(emitted - set(EVENTS))


def test_every_field_an_emit_names_is_in_its_event_payload_type() -> None:
    # the TypedDict of an event is its one description: a field written at a call site
    # and missing from it (or a renamed one) fails here
    undeclared = [
        f"{where}: {event}.{name}"
        for events, keywords, where in _emit_calls()
        for event in events
        if event in EVENTS
        for name in keywords
        if name not in EVENTS[event].fields and name not in EVENTS[event].optional
    ]
    assert undeclared == []


def test_the_catalogue_fields_come_from_the_payload_types() -> None:
    search = EVENTS["search"]
    assert search.payload is SearchPayload
    assert dict(search.fields) == {"query": str}  # Required
    assert search.optional["cached"] is bool and search.optional["fetched_at"] == (float, int)
    assert set(search.optional) == set(SearchPayload.__annotations__) - {"query"}
    assert EVENTS["gate_decision"].fields["iteration"] == (int, type(None))
    assert EVENTS["new_best"].fields == {"iteration": int, "id": str}
    assert EVENTS["gate_decision"].optional["method"] is None  # Any: not checked
    assert all(spec.payload.__doc__ for spec in EVENTS.values())


def test_an_unknown_or_malformed_event_is_refused(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    with pytest.raises(ValueError, match="unknown event 'nodde'"):
        log.emit("nodde", node="gate")
    with pytest.raises(ValueError, match="'node'"):
        log.emit("node", iteration=1)
    with pytest.raises(ValueError, match="unknown event"):
        emit_progress(None, "no_such_event")
    with pytest.raises(ValueError, match="'query'"):  # a required field of the wrong type
        log.emit("search", query=3)
    with pytest.raises(ValueError, match="'cached'"):  # an optional field, present, mistyped
        check_event("search", {"query": "q", "cached": "yes"})
    with pytest.raises(ValueError, match="'iteration'"):
        emit_progress(None, "new_best", iteration=None, id="x")
    # optional fields may be left out; fields outside the payload type ride along unchecked
    check_event("search", {"query": "q", "anything": object()})
    check_event("gate_decision", {"iteration": None, "method": object()})
    assert [e["event"] for e in log.memory] == []


class _Runtime:
    def __init__(self) -> None:
        self.streamed: list[dict] = []

    def stream_writer(self, record: dict) -> None:
        self.streamed.append(record)


def test_one_emit_writes_the_log_and_the_stream_with_the_same_fields(tmp_path: Path) -> None:
    from evoduet_graph import EvoDuetConfig, build_context, load_task
    from tests.conftest import SMOKE_TASK
    from tests.fakes import ScriptedChatModel
    from tests.fault_harness import InProcessEvaluator

    ctx = build_context(
        load_task(SMOKE_TASK),
        EvoDuetConfig(),
        tmp_path / "run",
        llm=ScriptedChatModel(responses=[]),
        evaluator=InProcessEvaluator(),
    )
    runtime = _Runtime()
    record = emit(ctx, runtime, "search", iteration=1, query="q", results=0, cached=False)
    assert runtime.streamed == [record]
    assert ctx.events.memory[-1] == record
