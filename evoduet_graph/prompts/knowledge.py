"""Structured-output schemas and prompt rendering of the world-knowledge layer (paper §3.2-3.3).

The gate, ``construct_query`` and ``hypothetical_score`` nodes ask the model for JSON objects of
these pydantic schemas through `evoduet_graph.llm.structured_call`; garbage output degrades to
the documented defaults, never to a crash.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

from evoduet_graph.prompts.untrusted import neutralise
from evoduet_graph.state import DocumentRef, KnowledgeState

_DECISIONS = {
    "no-op": "no-op",
    "noop": "no-op",
    "no_op": "no-op",
    "none": "no-op",
    "look-up": "look-up",
    "lookup": "look-up",
    "look_up": "look-up",
    "retrieve": "retrieve",
    "search": "retrieve",
}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


KNOWLEDGE_CHARS = 200
"""Cap of each knowledge-state field (about one sentence of 30 words). It is part of the JSON
schema (``maxLength``), so a grammar-constrained model (the embedded llama.cpp one) cannot
ramble until ``max_tokens`` truncates the JSON. It was 400 before the outputs were made lean:
the gate and ``hypothetical_score`` write these three fields on every call, each output token
of the embedded model costs ~0.1 s on 2 cores, and the next prompts show the fields only as a
short summary of the knowledge state."""

REASONING_CHARS = 160
"""Cap of a gate's ``reasoning``: one sentence."""

QUERY_CHARS = 160
"""Cap of one search query: the prompt asks for at most 20 words."""


class KnowledgeFields(BaseModel):
    """The knowledge state (paper §3.2): known / established / unresolved, free text."""

    known: str = Field("", max_length=KNOWLEDGE_CHARS)
    established: str = Field("", max_length=KNOWLEDGE_CHARS)
    unresolved: str = Field("", max_length=KNOWLEDGE_CHARS)

    @field_validator("known", "established", "unresolved", mode="before")
    @classmethod
    def _coerce(cls, value: Any) -> str:
        return _text(value)[:KNOWLEDGE_CHARS]

    def as_state(self) -> KnowledgeState:
        """The knowledge state these fields describe."""
        return KnowledgeState(
            known=self.known, established=self.established, unresolved=self.unresolved
        )


class GateOutput(KnowledgeFields):
    """The gate's structured answer. Decision spellings like ``lookup`` are normalised."""

    decision: Literal["no-op", "look-up", "retrieve"] = "no-op"
    reasoning: str = Field("", max_length=REASONING_CHARS)
    document_ids: list[str] = Field(default_factory=list, max_length=10)

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: Any) -> str:
        key = str(value).strip().lower().replace(" ", "-")
        if key not in _DECISIONS:
            raise ValueError(f"decision must be no-op, look-up or retrieve, got {value!r}")
        return _DECISIONS[key]

    @field_validator("reasoning", mode="before")
    @classmethod
    def _reasoning(cls, value: Any) -> str:
        return _text(value)[:REASONING_CHARS]

    @field_validator("document_ids", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> list[str]:
        # Only ValueError may leave a validator (pydantic turns it into a validation error,
        # structured_call then falls back); a TypeError would crash the run.
        if value is None:
            return []
        if isinstance(value, str | int | float):  # bool is an int: "True" is no id, dropped
            value = [] if isinstance(value, bool) else re.split(r"[,\s]+", str(value))
        if not isinstance(value, list | tuple):
            raise ValueError(  # noqa: TRY004 - pydantic turns only ValueError into a validation error
                f"document_ids must be a list of ids, got {type(value).__name__}"
            )
        return [str(v).strip() for v in value if str(v).strip()][:10]


class QueryPlan(BaseModel):
    """``construct_query`` output: the round's search queries.

    ``construct_query`` output: the round's search queries (at most `MAX_QUERIES`; extra
    ones are dropped, never a validation error).
    """

    MAX_QUERIES: ClassVar[int] = 8

    queries: list[Annotated[str, StringConstraints(max_length=QUERY_CHARS)]] = Field(
        default_factory=list, max_length=8
    )

    @field_validator("queries", mode="before")
    @classmethod
    def _queries(cls, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):  # e.g. {"queries": 5}: a validation error
            raise ValueError(  # noqa: TRY004 - a TypeError would escape pydantic and crash the run
                f"queries must be a list of strings, got {type(value).__name__}"
            )
        # a number or null in the list is no query: searching "123" / "None" finds noise
        queries = [v[:QUERY_CHARS] for v in value if isinstance(v, str) and v.strip()]
        return queries[: cls.MAX_QUERIES]

    @model_validator(mode="wrap")
    @classmethod
    def _count_dropped(cls, data: Any, handler: Any) -> QueryPlan:
        plan: QueryPlan = handler(data)
        raw = data.get("queries") if isinstance(data, dict) else None
        if isinstance(raw, list | tuple):
            plan._dropped = [repr(v)[:40] for v in raw if not isinstance(v, str)]
        return plan

    _dropped: list[str] = PrivateAttr(default_factory=list)

    @property
    def dropped(self) -> list[str]:
        """The reply's list entries that were no string (dropped), as ``repr``."""
        return list(self._dropped)


@functools.cache
def query_plan_schema(num_queries: int) -> type[QueryPlan]:
    """A `QueryPlan` whose JSON schema allows exactly the round's number of queries.

    A `QueryPlan` whose JSON schema allows exactly as many queries as the round uses
    (``retrieval.queries_per_round``; lean outputs): a grammar-constrained model
    (the embedded one) stops after them instead of writing queries that would be dropped;
    a model without a grammar that writes more has the extra ones dropped.
    """
    n = max(1, num_queries)

    class SizedQueryPlan(QueryPlan):
        MAX_QUERIES: ClassVar[int] = n
        queries: list[Annotated[str, StringConstraints(max_length=QUERY_CHARS)]] = Field(
            default_factory=list, max_length=n
        )

    SizedQueryPlan.__name__ = "QueryPlan"
    return SizedQueryPlan


class DocumentScore(BaseModel):
    """One document's predicted child score (the list form of `DocumentScores`)."""

    doc_id: str = Field(max_length=40)
    predicted_score: float


class DocumentScores(KnowledgeFields):
    """``hypothetical_score`` output: a predicted child score per document + knowledge state."""

    scores: list[DocumentScore] = Field(default_factory=list, max_length=40)

    @field_validator("scores", mode="before")
    @classmethod
    def _cap(cls, value: Any) -> Any:
        return value[:40] if isinstance(value, list) else value

    def predicted(self) -> dict[str, float]:
        """The predicted child score by document id.

        The variant `scores_schema` builds (the one the model is asked for) overrides this with
        its keyed ``scores``.
        """
        return {s.doc_id: s.predicted_score for s in self.scores}


def _keyed_by(doc_ids: list[str], value: Any) -> dict[str, Any]:
    """`create_model` arguments for an object with one required key per document id.

    The fields are ``d0``, ``d1``, ... aliased to the ids (ids need not be identifiers), each
    holding a ``value``; every id is required in the JSON schema, unknown keys are ignored, and
    a missing id validates to None.
    """
    required: list[JsonValue] = list(doc_ids)
    return {
        "__config__": ConfigDict(
            populate_by_name=True, extra="ignore", json_schema_extra={"required": required}
        ),
        **{f"d{i}": (value, Field(None, alias=doc_id)) for i, doc_id in enumerate(doc_ids)},
    }


def scores_schema(doc_ids: list[str]) -> type[DocumentScores]:
    """A `DocumentScores` variant whose ``scores`` is an object keyed by exactly ``doc_ids``.

    Every id is a required key of the JSON schema, so a grammar-constrained model (the
    embedded llama.cpp one) writes one number per document and stops: it cannot repeat list
    items until ``max_tokens``. Validation stays tolerant: the list form
    ``[{"doc_id", "predicted_score"}]`` is accepted, unknown ids are ignored and missing ids
    are None (the node gives them the neutral fallback).
    """
    score_map = create_model("ScoreMap", **_keyed_by(doc_ids, float))

    class KeyedDocumentScores(DocumentScores):
        # pydantic builds ``score_map`` at run time (mypy cannot see it as a type); this schema
        # variant replaces the base's list with that keyed object
        scores: score_map  # type: ignore[assignment]

        @field_validator("scores", mode="before")
        @classmethod
        def _from_list(cls, value: Any) -> Any:
            if isinstance(value, list):
                return {
                    str(item.get("doc_id")): item.get("predicted_score")
                    for item in value
                    if isinstance(item, dict)
                }
            return value

        def predicted(self) -> dict[str, float]:
            """The predicted child score by document id (ids the model left out omitted)."""
            dumped = self.scores.model_dump(by_alias=True)
            return {k: float(v) for k, v in dumped.items() if v is not None}

    KeyedDocumentScores.__name__ = "DocumentScores"
    return KeyedDocumentScores


class DocumentRating(BaseModel):
    """One document's listwise-rerank rating: actionable relevance and marginal novelty."""

    relevance: float = Field(0.0, ge=0.0, le=1.0)
    novelty: float = Field(0.0, ge=0.0, le=1.0)

    @field_validator("relevance", "novelty", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return 0.0
        return min(1.0, max(0.0, number)) if math.isfinite(number) else 0.0


class DocumentRatings(KnowledgeFields):
    """``rerank`` output: a rating per document id + the knowledge state."""

    def rated(self) -> dict[str, DocumentRating]:
        """The ratings given, by document id (missing ids left out).

        The base schema carries no ratings, so it rates nothing; the variant `ratings_schema`
        builds (the one the model is asked for) overrides this with its keyed ``ratings``.
        """
        return {}


def ratings_schema(doc_ids: list[str]) -> type[DocumentRatings]:
    """A `DocumentRatings` variant whose ``ratings`` is keyed by exactly ``doc_ids``.

    A `DocumentRatings` variant whose ``ratings`` is an object keyed by exactly
    ``doc_ids`` (each a required key, as in `scores_schema`, so a grammar-constrained model
    rates every document once and stops). A list form ``[{"doc_id", "relevance",
    "novelty"}]`` is accepted; unknown ids are ignored and missing ones are None.
    """
    rating_map = create_model("RatingMap", **_keyed_by(doc_ids, DocumentRating | None))

    class KeyedDocumentRatings(DocumentRatings):
        ratings: rating_map

        @field_validator("ratings", mode="before")
        @classmethod
        def _from_list(cls, value: Any) -> Any:
            if isinstance(value, list):
                return {str(item.get("doc_id")): item for item in value if isinstance(item, dict)}
            return value

        def rated(self) -> dict[str, DocumentRating]:
            return {
                doc_id: getattr(self.ratings, f"d{i}")
                for i, doc_id in enumerate(doc_ids)
                if getattr(self.ratings, f"d{i}") is not None
            }

    KeyedDocumentRatings.__name__ = "DocumentRatings"
    return KeyedDocumentRatings


def knowledge_text(state: KnowledgeState | None) -> str:
    """The knowledge state as three labelled lines ("(none yet)" before the first gate call)."""
    if not state:
        return "(none yet)"
    return (
        f"known: {state.get('known') or '-'}\n"
        f"established: {state.get('established') or '-'}\n"
        f"unresolved: {state.get('unresolved') or '-'}"
    )


def documents_text(docs: list[DocumentRef], contents: dict[str, str], max_chars: int) -> str:
    """Documents as ``<document id=...>`` blocks with neutralised, truncated content."""
    blocks = []
    for doc in docs:
        body = neutralise(contents.get(doc["id"], ""))[:max_chars]
        title = neutralise(doc["title"])[:200]
        blocks.append(
            f'<document id="{doc["id"]}">\ntitle: {title}\nurl: {neutralise(doc["url"])}\n'
            f"{body}\n</document>"
        )
    return "\n".join(blocks) if blocks else "(none)"


RETAINED_EXCERPT_CHARS = 400
"""Characters of each retained document's text shown to the next round's query call."""


def retained_text(docs: list[DocumentRef], contents: dict[str, str] | None = None) -> str:
    """The documents retained so far: id, predicted child score, title, and a text excerpt.

    The paper conditions the next round's queries on the retained documents themselves, not
    only on their titles: each gets a neutralised one-paragraph excerpt of its stored text
    (``contents``; at most `RETAINED_EXCERPT_CHARS` characters, so K documents stay bounded).
    """
    if not docs:
        return "(none yet)"
    lines = []
    for d in docs:
        line = (
            f"- {d['id']} (predicted child score {d.get('predicted_score')}): "
            f"{neutralise(d['title'])[:160]}"
        )
        excerpt = " ".join(neutralise((contents or {}).get(d["id"], "")).split())
        if len(excerpt) > RETAINED_EXCERPT_CHARS:
            excerpt = excerpt[: RETAINED_EXCERPT_CHARS - 1] + "…"
        lines.append(f"{line}\n  {excerpt}" if excerpt else line)
    return "\n".join(lines)
