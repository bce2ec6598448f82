"""No structured reply can crash a run.

Every structured-output schema, fed arbitrary JSON values for every field, validates or raises a
pydantic validation error only, and `structured_call` always returns a typed value (parsed, or the
typed default).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from evoduet_graph.llm.structured import structured_call
from evoduet_graph.prompts.knowledge import DocumentScores, GateOutput, QueryPlan, scores_schema
from evoduet_graph.scaffolds.evox import StrategyOutput
from tests.fakes import ScriptedChatModel

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=8,
)

DOC_IDS = ["doc_000001", "doc_000002"]
SCHEMAS: dict[str, type[BaseModel]] = {
    "gate": GateOutput,
    "query_plan": QueryPlan,
    "document_scores": DocumentScores,
    "keyed_document_scores": scores_schema(DOC_IDS),
    "strategy": StrategyOutput,
}


def _fields(schema: type[BaseModel]) -> list[str]:
    names = []
    for name, info in schema.model_fields.items():
        names.append(info.alias or name)
    return names


def _payloads(schema: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with any subset of the schema's fields.

    Objects with any subset of the schema's fields, each an arbitrary JSON value, plus the
    nested ``scores`` shapes (list of objects / object keyed by document id).
    """
    fields = _fields(schema)
    values = st.fixed_dictionaries({}, optional={name: JSON for name in fields})
    nested = st.fixed_dictionaries(
        {
            "scores": st.one_of(
                st.lists(
                    st.fixed_dictionaries({}, optional={"doc_id": JSON, "predicted_score": JSON})
                ),
                st.fixed_dictionaries({}, optional={d: JSON for d in DOC_IDS}),
            )
        }
    )
    return values | (nested if "scores" in fields else values)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_validates_or_raises_only_a_validation_error(name: str) -> None:
    schema = SCHEMAS[name]

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_payloads(schema) | JSON)
    def check(payload: Any) -> None:
        try:
            value = schema.model_validate(payload)
        except ValidationError:
            return
        assert isinstance(value, schema)

    check()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_structured_call_returns_a_typed_value_for_any_json_reply(name: str) -> None:
    schema = SCHEMAS[name]
    default = {
        "gate": GateOutput,
        "query_plan": QueryPlan,
        "document_scores": DocumentScores,
        "keyed_document_scores": lambda: schema.model_validate({"scores": {}}),
        "strategy": lambda: StrategyOutput(parent_rule="best"),
    }[name]()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_payloads(schema))
    def check(payload: dict[str, Any]) -> None:
        llm = ScriptedChatModel(responses=[], default=json.dumps(payload))
        result = structured_call(llm, "answer in JSON", schema, default=default)
        assert isinstance(result.value, schema)
        assert result.used_default or result.method in (
            "json_schema",
            "json_mode",
            "extraction",
            "repair",
        )

    check()


@pytest.mark.parametrize(
    ("schema", "reply"),
    [
        (GateOutput, {"decision": "no-op", "document_ids": 7}),
        (QueryPlan, {"queries": 5}),
        (QueryPlan, {"queries": True}),
        (GateOutput, {"decision": "look-up", "document_ids": {"a": 1}}),
    ],
)
def test_the_replayed_replies_no_longer_crash(schema: type[BaseModel], reply: dict) -> None:
    llm = ScriptedChatModel(responses=[], default=json.dumps(reply))
    result = structured_call(llm, "answer in JSON", schema, default=schema())
    assert isinstance(result.value, schema)
