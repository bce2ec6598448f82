"""The knowledge-gap gate without a search database (ablation ``use_search_database: false``).

With ``retrieval.use_search_database: false`` retrieval is stateless: nothing from earlier
searches is kept, so the gate (prompt ``gate_stateless.md``, no database section) may only
choose ``no-op`` or ``retrieve``; ``look-up`` does not exist in its reply schema. A ``look-up``
the model writes anyway is not accepted: the reply fails validation and the structured-output
helper repairs it or falls back to ``no-op`` (event ``gate_fallback``), as for any unusable
gate reply (`evoduet_graph.nodes.gate`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from evoduet_graph.context import Context
from evoduet_graph.nodes._common import ask_gate, gate_update
from evoduet_graph.prompts.descriptor import context_text, iteration_messages
from evoduet_graph.prompts.knowledge import (
    _DECISIONS,
    REASONING_CHARS,
    KnowledgeFields,
    _text,
    knowledge_text,
)
from evoduet_graph.prompts.render import render
from evoduet_graph.state import OuterState


class StatelessGateOutput(KnowledgeFields):
    """The stateless gate's reply: knowledge state and ``no-op`` / ``retrieve``."""

    decision: Literal["no-op", "retrieve"] = "no-op"
    reasoning: str = Field("", max_length=REASONING_CHARS)

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: Any) -> str:
        key = str(value).strip().lower().replace(" ", "-")
        decision = _DECISIONS.get(key)
        if decision not in ("no-op", "retrieve"):
            raise ValueError(f"decision must be no-op or retrieve, got {value!r}")
        return decision

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning(cls, value: Any) -> str:
        return _text(value)[:REASONING_CHARS]


def stateless_gate_prompt(state: OuterState, ctx: Context) -> str:
    """The stateless gate's user message (``prompts/gate_stateless.md``) for this iteration.

    The same context c_t as the llm gate's prompt (`evoduet_graph.nodes.gate.gate_prompt`):
    it follows the run's system message and starts with
    `evoduet_graph.prompts.descriptor.context_text`, so the ablation differs from the method
    only by what it removes (the database, the recent documents and ``look-up``).
    """
    parent_id = state["parent_id"] or ""
    return render(
        "gate_stateless",
        context=context_text(
            ctx, parent_id, state.get("iteration", 0), state.get("inspiration_ids")
        ),
        knowledge=knowledge_text(state.get("knowledge_state")),
    )


def stateless_decision(state: OuterState, ctx: Context) -> dict[str, Any]:
    """Run the stateless gate.

    Run the stateless gate: ``gate_decision`` (no-op / retrieve), ``gate_reason`` and
    ``knowledge_state``; never ``gate_document_ids``.
    """
    iteration = state.get("iteration", 0)
    result, failed = ask_gate(
        state, ctx, iteration_messages(ctx, stateless_gate_prompt(state, ctx)), StatelessGateOutput
    )
    if failed is not None:
        return failed
    return gate_update(ctx, iteration, result, result.value.decision, [])
