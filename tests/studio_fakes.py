"""Chat-model factories that a LangGraph dev server can import by spec
(``"model": "python:tests.studio_fakes:improving_model"`` in a Studio run's context)."""

from __future__ import annotations

from tests.conftest import RADIUS_UP, SPREAD_UP
from tests.fakes import KnowledgeResponder, ScriptedChatModel


def improving_model() -> ScriptedChatModel:
    """Answers the smoke task's first two mutation prompts with improving diffs, then
    "no change" (the gate and inner-loop prompts get the scripted knowledge answers)."""
    answers = iter([RADIUS_UP, SPREAD_UP])
    return ScriptedChatModel(
        responses=[],
        default=KnowledgeResponder(gate="no-op", generate=lambda _m: next(answers, "no change")),
    )
