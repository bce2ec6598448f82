"""Human review with LangGraph's ``interrupt()``.

The proposed queries before each search (``retrieval.review_queries``) and the gate's decision
(``gate.review``).

The node pauses the graph with a JSON payload; the run's checkpoint holds the pause, so Studio
shows it (and resumes with ``Command(resume=...)``), the CLI asks on the terminal, and a killed
run that was waiting resumes waiting. LangGraph re-executes the paused node from its start on
resume, so the node must not redo work whose answer may change: the proposal is written to
the events as ``review_pending`` first, and a re-executed node proposes it again instead of
calling the model a second time. The answer is recorded as a ``review`` event.

Payloads (``kind`` tells them apart):

* ``{"kind": "review_queries", "iteration", "round", "queries": [...], "knowledge_gap"}`` —
  resume with the approved/edited list of queries (a list of strings, a string with one query
  per line, or ``{"queries": [...]}``; ``true`` keeps the proposal; an empty list skips this
  round's search);
* ``{"kind": "review_gate", "iteration", "decision", "reason", "document_ids",
  "knowledge_gap"}`` — resume with a decision (``no-op`` | ``look-up`` | ``retrieve``), a
  mapping ``{"decision", "document_ids"}``, or ``true`` to keep it.

(LangGraph refuses ``Command(resume=None)``; `evoduet_graph.api.run` sends ``true`` for a
reviewer callback that returns None.)

A resume value of the wrong shape is refused: the node pauses again with the same payload plus
``"error"`` (why the answer was refused), so nothing is lost and the reviewer answers again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from langgraph.types import interrupt

from evoduet_graph.context import Context
from evoduet_graph.errors import UserError
from evoduet_graph.rundir.events import read_events

DECISIONS = ("no-op", "look-up", "retrieve")
P = TypeVar("P")  # what a review pause proposes
R = TypeVar("R")  # the parsed answer


class ReviewError(UserError, ValueError):
    """A review answer has the wrong shape or names unknown documents."""


def _events(ctx: Context) -> list[dict[str, Any]]:
    """The run's events so far (the file: earlier sessions included)."""
    if ctx.events.path is not None:
        return list(read_events(ctx.events.path))
    return list(ctx.events.memory)


def _pending(ctx: Context, kind: str, iteration: int, round_: int | None) -> Any:
    """The proposal of an earlier execution of this node that is still waiting, if any."""
    found = None
    for ev in _events(ctx):
        if ev.get("iteration") != iteration or ev.get("round") != round_:
            continue
        if ev.get("event") == "review_pending" and ev.get("kind") == kind:
            found = ev.get("proposal")
        elif ev.get("event") == "review" and ev.get("kind") == kind:
            found = None
    return found


def _ask(
    ctx: Context,
    kind: str,
    iteration: int,
    round_: int | None,
    propose: Callable[[], P],
    payload: Callable[[P], dict[str, Any]],
    parse: Callable[[Any, P], R],
) -> tuple[P, R]:
    """Ask the reviewer about the proposal until its answer parses.

    ``(proposal, parsed answer)``: the proposal (made once, see the module docstring) and
    the reviewer's answer to it, asked again (with ``error``) until it parses.
    """
    proposal: P | None = _pending(ctx, kind, iteration, round_)  # a replay's proposal
    if proposal is None:
        proposal = propose()
        _emit_at(ctx, "review_pending", kind, iteration, round_, proposal=proposal)
    error: str | None = None
    attempt = 0
    while True:
        body = {"kind": kind, "iteration": iteration, **payload(proposal)}
        answer = interrupt({**body, "error": error} if error else body)
        try:
            return proposal, parse(answer, proposal)
        except ReviewError as exc:
            error = str(exc)
            attempt += 1
            # a resumed node replays the earlier answers: record each refusal once
            if not any(
                ev.get("event") == "review_refused"
                and (ev.get("kind"), ev.get("iteration"), ev.get("round"), ev.get("attempt"))
                == (kind, iteration, round_, attempt)
                for ev in _events(ctx)
            ):
                _emit_at(
                    ctx, "review_refused", kind, iteration, round_, attempt=attempt, error=error
                )


def parse_queries(answer: Any, proposal: list[str], max_chars: int) -> list[str]:
    """The reviewed queries from a resume value (see the module docstring).

    Raises:
        ReviewError: a value that is none of the accepted shapes.
    """
    if answer is None or answer is True:
        return list(proposal)
    if isinstance(answer, dict):
        if "queries" not in answer:
            raise ReviewError("a query review answer must hold 'queries': [...]")
        answer = answer["queries"]
    if isinstance(answer, str):
        answer = answer.splitlines()
    if not isinstance(answer, list) or not all(isinstance(q, str) for q in answer):
        raise ReviewError(
            "a query review answer is a list of query strings, a string with one query per "
            f"line, or {{'queries': [...]}}; got {type(answer).__name__}"
        )
    return list(dict.fromkeys(q.strip()[:max_chars] for q in answer if q.strip()))


def review_queries(ctx: Context, state: dict[str, Any], queries: list[str]) -> list[str]:
    """Pause before a search with the proposed ``queries``.

    Return the approved/edited list (``queries`` unchanged when ``retrieval.review_queries`` is
    off).
    """
    if not ctx.config.retrieval.review_queries:
        return queries
    iteration, round_ = int(state.get("iteration", 0)), int(state.get("round", 0))
    gap = (state.get("knowledge_state") or {}).get("unresolved")
    max_chars = ctx.config.retrieval.max_query_chars
    proposal, reviewed = _ask(
        ctx,
        "review_queries",
        iteration,
        round_,
        lambda: list(queries),
        lambda p: {"round": round_, "queries": p, "knowledge_gap": gap},
        lambda answer, p: parse_queries(answer, p, max_chars),
    )
    _emit_review(ctx, "review_queries", iteration, round_, proposal, reviewed)
    return reviewed


def parse_decision(answer: Any, proposal: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The reviewed gate update from a resume value (see the module docstring).

    Raises:
        ReviewError: an unknown decision, or a look-up without known document ids.
    """
    if answer is None or answer is True or answer == "":
        return dict(proposal)
    if isinstance(answer, str):
        answer = {"decision": answer.strip()}
    if not isinstance(answer, dict) or answer.get("decision") not in DECISIONS:
        raise ReviewError(
            f"a gate review answer is one of {', '.join(DECISIONS)} or "
            f"{{'decision': ..., 'document_ids': [...]}}; got {answer!r}"[:300]
        )
    decision = answer["decision"]
    ids = list(
        answer.get("document_ids")
        or (proposal.get("gate_document_ids", []) if decision == "look-up" else [])
    )
    if decision == "look-up" and not ctx.config.retrieval.use_search_database:
        raise ReviewError(
            "look-up needs the search database; retrieval.use_search_database is false "
            "(answer no-op or retrieve)"
        )
    if decision == "look-up":
        db = ctx.search_db
        unknown = [i for i in ids if db is None or not db.has_document(i)]
        if not ids or unknown:
            raise ReviewError(
                "a look-up needs the ids of stored documents (document_ids); "
                + (f"unknown: {', '.join(map(str, unknown))}" if unknown else "none given")
            )
    update = dict(proposal)
    update["gate_decision"] = decision
    update["gate_document_ids"] = ids
    if decision != proposal.get("gate_decision"):
        update["gate_reason"] = f"reviewer: {decision} (proposed {proposal.get('gate_decision')})"
    return update


def review_gate(
    ctx: Context, state: dict[str, Any], decide: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The gate's update after review.

    ``decide()`` once (its proposal survives a resume), then the reviewer's answer (``decide()``
    itself when ``gate.review`` is off).
    """
    if not ctx.config.gate.review:
        return decide()
    iteration = int(state.get("iteration", 0))
    proposal, update = _ask(
        ctx,
        "review_gate",
        iteration,
        None,
        decide,
        lambda p: {
            "decision": p.get("gate_decision"),
            "reason": p.get("gate_reason"),
            "document_ids": p.get("gate_document_ids", []),
            "knowledge_gap": (p.get("knowledge_state") or {}).get("unresolved"),
        },
        lambda answer, p: parse_decision(answer, p, ctx),
    )
    proposed, decided = proposal.get("gate_decision"), update["gate_decision"]
    _emit_review(ctx, "review_gate", iteration, None, proposed, decided)
    return update


def _emit_review(
    ctx: Context, kind: str, iteration: int, round_: int | None, proposal: Any, answer: Any
) -> None:
    """Log one review (the ``review`` event): what was proposed, what was answered.

    Args:
        ctx: the run's context (its event log).
        kind: ``review_queries`` or ``review_gate``.
        iteration: the outer iteration.
        round_: the inner round (None for the gate).
        proposal: what the model proposed.
        answer: what the reviewer kept (``edited`` when it differs).
    """
    _emit_at(
        ctx,
        "review",
        kind,
        iteration,
        round_,
        proposal=proposal,
        answer=answer,
        edited=answer != proposal,
    )


def _emit_at(
    ctx: Context, event: str, kind: str, iteration: int, round_: int | None, **fields: Any
) -> None:
    """Log a review event (``review_pending``, ``review_refused``, ``review``).

    Every review event names the review it belongs to (``kind``, ``iteration``, ``round``),
    which is how a replayed node finds its earlier proposal and refusals.
    """
    ctx.events.emit(event, kind=kind, iteration=iteration, round=round_, **fields)
