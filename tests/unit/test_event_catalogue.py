"""Events as a catalogue, with the same fields in both sinks.

Events as a catalogue: every event the package writes is named in one module, and an event
written to both sinks carries the same fields in both.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evoduet_graph.nodes._common import emit, emit_progress
from evoduet_graph.rundir.events import EVENTS, EventLog

PACKAGE = Path(__file__).resolve().parents[2] / "evoduet_graph"


def _emitted_names() -> set[str]:
    names: set[str] = set()
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
                for const in ast.walk(arg):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        names.add(const.value)
    return names


def test_every_emitted_event_is_in_the_catalogue() -> None:
    emitted = _emitted_names()
    assert len(emitted) > 30
    assert emitted <= set(EVENTS), sorted(emitted - set(EVENTS))


def test_an_unknown_or_malformed_event_is_refused(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    with pytest.raises(ValueError, match="unknown event 'nodde'"):
        log.emit("nodde", node="gate")
    with pytest.raises(ValueError, match="'node'"):
        log.emit("node", iteration=1)
    with pytest.raises(ValueError, match="unknown event"):
        emit_progress(None, "no_such_event")


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
