"""Chat-model factories that a LangGraph dev server can import by spec.

Chat-model factories that a LangGraph dev server can import by spec
(``"model": "python:tests.studio_fakes:improving_model"`` in a Studio run's context).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import RADIUS_UP, SPREAD_UP
from tests.fakes import KnowledgeResponder, ScriptedChatModel


def improving_model() -> ScriptedChatModel:
    """Improving answers to the smoke task's first two mutation prompts.

    Answers the smoke task's first two mutation prompts with improving diffs, then
    "no change" (the gate and inner-loop prompts get the scripted knowledge answers).
    """
    answers = iter([RADIUS_UP, SPREAD_UP])
    return ScriptedChatModel(
        responses=[],
        default=KnowledgeResponder(gate="no-op", generate=lambda _m: next(answers, "no change")),
    )


def responder_content(responder: KnowledgeResponder) -> Callable[[dict[str, Any]], str]:
    """``content`` for `tests.fake_openai_server.FaultyServer`.

    ``content`` for `tests.fake_openai_server.FaultyServer`: each chat-completions request
    answered by ``responder`` as if it were the chat model (gate, inner loop, generation).
    """
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from tests.fake_openai_server import message_text

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}

    def content(body: dict[str, Any]) -> str:
        messages = [
            kinds.get(m.get("role"), HumanMessage)(content=message_text(m))
            for m in body.get("messages") or []
        ]
        return responder(messages)

    return content


def growing_radius() -> Callable[[Any], str]:
    """Generation answers whose radius grows with every call.

    Generation answers for the smoke task whose radius grows with every call (0.7, 0.8,
    ... up to 1.0): each evaluated child is a new best, whatever its parent.
    """
    from tests.fault_harness import smoke_program

    calls = iter(range(1, 1000))

    def answer(_messages: Any) -> str:
        radius = min(1.0, 0.6 + 0.1 * next(calls))
        return f"```python\n{smoke_program(radius, 3.141593)}```"

    return answer
