"""Joint-level in-loop search (paper §2.3 baseline): the mutation call itself may search.

With ``joint_search.enabled`` (configs/joint_search.yaml: no gate, no inner loop) the
``generate`` node lets the model (the ``generate`` role's model, ``llm.roles``) search the
run's backend (``Context.searcher``: whatever the backend registry built for
``retrieval.backend``, behind the run's search cache ``Context.search_cache`` when
``retrieval.cache``) up to ``joint_search.max_calls`` times before it writes the
candidate. Two protocols, the same loop:

* ``tools`` — native tool calling: a LangChain tool ``search(query)`` is bound to the chat
  model (``bind_tools``); each tool call runs one search and its results go back as a
  `ToolMessage`; the first reply without a tool call is the candidate. When the calls are
  spent, the unbound model is asked once more for the candidate.
* ``structured`` — for models without native tool calling (the embedded model, served in
  process or by the bench's llama.cpp server): each turn one structured call returns
  ``{"action": "search" | "answer", "query"}`` (prompt ``joint_search_step.md``); after an
  ``answer`` (or the last search) one plain call with the results (``joint_search_answer.md``)
  writes the candidate.

``joint_search.protocol: auto`` takes ``tools`` when the chat model implements ``bind_tools``
and does not declare ``native_tool_calling = False``; else ``structured``.

Each returned document is shown with at most ``joint_search.max_result_chars`` / (max_calls ×
results_per_query) characters, so one mutation call sees no more document text than the
method's evidence block (a real run on the embedded model overflowed its 8192-token context
with uncapped results). Every search is recorded exactly as the method's: a ``search`` event
(query, URLs, document ids), the documents in D_search, and one record per candidate
(``jnt_<iteration>_c<index>``, decision ``joint-search``, one round per search with its query
and results), so queries, distinct URLs and the repeated-URL share are measured the same way
for both (the paper's 88.1% vs 62.4% comparison); ``record`` credits each candidate's record
with that candidate's realised Δ. The novelty resample of a rejected child is a plain call (no
second search loop).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field, field_validator

from evoduet_graph.context import Context
from evoduet_graph.llm import LocalChatModel, invoke_text, structured_call
from evoduet_graph.nodes._common import search_query
from evoduet_graph.prompts.render import render
from evoduet_graph.prompts.untrusted import neutralise
from evoduet_graph.search.database import RoundLog, RoundResult, SearchRecord, StoredDocument

Protocol = Literal["tools", "structured"]


class JointSearchStep(BaseModel):
    """One structured turn of the ``structured`` protocol: search once more, or answer."""

    action: Literal["search", "answer"] = "answer"
    query: str = Field("", max_length=300)

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> str:
        key = str(value).strip().lower()
        if key in ("search", "query", "retrieve"):
            return "search"
        if key in ("answer", "write", "done", "program"):
            return "answer"
        raise ValueError(f"action must be search or answer, got {value!r}")

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any) -> str:
        return " ".join(str(value or "").split())[:300]


def native_tool_calling(llm: BaseChatModel) -> bool:
    """Whether ``llm`` supports native tool calling (see the module docstring)."""
    if isinstance(llm, LocalChatModel) or getattr(llm, "native_tool_calling", True) is False:
        return False
    return type(llm).bind_tools is not BaseChatModel.bind_tools


def choose_protocol(ctx: Context) -> Protocol:
    """``joint_search.protocol`` with ``auto`` resolved for the run's chat model."""
    protocol = ctx.config.joint_search.protocol
    if protocol != "auto":
        return protocol
    return "tools" if native_tool_calling(ctx.model_for("generate")) else "structured"


@dataclass
class JointSearchLog:
    """What one mutation call searched: the queries and the stored documents per search."""

    queries: list[str] = field(default_factory=list)
    results: list[list[StoredDocument]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def document_chars(ctx: Context) -> int:
    """Characters shown per returned document.

    ``joint_search.max_result_chars`` split over the most documents one mutation call can receive
    (at least 100).
    """
    most = max(1, ctx.config.joint_search.max_calls * ctx.config.retrieval.results_per_query)
    return max(100, ctx.config.joint_search.max_result_chars // most)


def run_search(ctx: Context, log: JointSearchLog, query: str, iteration: int) -> str:
    """Run one search for the model; record it and return the results as prompt text."""
    retrieval = ctx.config.retrieval
    query = " ".join(query.split())[: retrieval.max_query_chars]
    if ctx.searcher is None:
        error: str | None = "no search backend in the runtime context"
        docs: list[Any] = []
        cached = False
    else:
        outcome = search_query(ctx, query)
        docs, error, cached = outcome.documents, outcome.error, outcome.cached
    if error:
        log.errors.append(f"{query!r}: {error}")
        ctx.events.emit("search_error", iteration=iteration, query=query, error=error[:500])
    stored = ctx.require_search_db().add_documents(docs, iteration)
    ctx.events.emit(
        "search",
        iteration=iteration,
        round=len(log.queries),
        query=query,
        urls=[d.url for d in stored],
        doc_ids=[d.doc_id for d in stored],
        joint=True,
        cached=cached,
    )
    log.queries.append(query)
    log.results.append(stored)
    if not stored:
        return f"(no results{': ' + error[:200] if error else ''})"
    cap = document_chars(ctx)
    return "\n".join(
        f'<document id="{d.doc_id}">\ntitle: {neutralise(d.title)[:200]}\n'
        f"url: {neutralise(d.url)}\n{neutralise(d.content)[:cap]}\n</document>"
        for d in stored
    )


@dataclass
class _SearchLoop:
    """One candidate's search loop: the part the two protocols share.

    The searches (each recorded by `run_search`), the budget ``joint_search.max_calls`` and the
    final plain call of the ``generate`` role's model that writes the candidate.
    """

    ctx: Context
    config: RunnableConfig
    log: JointSearchLog
    iteration: int

    @property
    def remaining(self) -> int:
        """Searches left of ``joint_search.max_calls``."""
        return self.ctx.config.joint_search.max_calls - len(self.log.queries)

    def search(self, query: str) -> str:
        """Run and record one search; the results as prompt text."""
        return run_search(self.ctx, self.log, query, self.iteration)

    def write(self, messages: list[BaseMessage]) -> str:
        """The plain call that writes the candidate after the searches."""
        text, _ = invoke_text(
            self.ctx.model_for("generate"),
            messages,
            config=self.config,
            retry=self.ctx.llm_retry("generate"),
        )
        return text


def _tools_answer(loop: _SearchLoop, messages: list[BaseMessage]) -> str:
    ctx = loop.ctx

    def search(query: str) -> str:
        """Search the documentation for `query`; returns the matching documents."""
        return loop.search(query)

    tool = StructuredTool.from_function(search, name="search")
    bound = ctx.model_for("generate").bind_tools([tool])
    prompt = render("joint_search_tools", max_calls=ctx.config.joint_search.max_calls)
    msgs = [*messages, HumanMessage(prompt)]
    while loop.remaining > 0:
        text, reply = invoke_text(bound, msgs, config=loop.config, retry=ctx.llm_retry("generate"))
        calls = list(getattr(reply, "tool_calls", None) or [])
        if not calls:
            return text
        msgs.append(reply)
        for call in calls:
            if loop.remaining > 0:
                output = search(str((call.get("args") or {}).get("query", "")))
            else:
                output = "(search limit reached: write the program now)"
            msgs.append(ToolMessage(content=output, tool_call_id=call.get("id") or "call"))
    msgs.append(HumanMessage(render("joint_search_answer", results="(see the tool results above)")))
    return loop.write(msgs)


def _structured_answer(loop: _SearchLoop, messages: list[BaseMessage]) -> str:
    ctx, log = loop.ctx, loop.log
    texts: list[str] = []
    while loop.remaining > 0:
        searches = "\n".join(
            f"- {json.dumps(q)}: {len(r)} result(s)"
            for q, r in zip(log.queries, log.results, strict=True)
        )
        prompt = [
            *messages,
            HumanMessage(
                render("joint_search_step", remaining=loop.remaining, searches=searches or "(none)")
            ),
        ]
        result = structured_call(
            ctx.model_for("generate"),
            prompt,
            JointSearchStep,
            default=JointSearchStep,
            config=loop.config,
            retry=ctx.llm_retry("generate"),
        )
        step = result.value
        if step.action != "search" or not step.query:
            break
        texts.append(f"## Search {json.dumps(step.query)}\n" + loop.search(step.query))
    msgs = list(messages)
    if texts:
        msgs.append(HumanMessage(render("joint_search_answer", results="\n\n".join(texts))))
    return loop.write(msgs)


def joint_answer(
    ctx: Context, iteration: int, index: int, parent_id: str
) -> Callable[[list[BaseMessage], RunnableConfig], str]:
    """The ``answer`` function ``generate`` uses instead of a plain model call.

    It runs the search loop, writes the candidate's D_search record and returns the model's final
    text.

    Raises:
        LLMCallError: a model call failed (the candidate fails, as for a plain call).
    """

    def answer(messages: list[BaseMessage], config: RunnableConfig) -> str:
        log = JointSearchLog()
        protocol = choose_protocol(ctx)
        try:
            loop = _SearchLoop(ctx, config, log, iteration)
            text = (_tools_answer if protocol == "tools" else _structured_answer)(loop, messages)
        finally:
            record_searches(ctx, log, iteration, index, parent_id, protocol)
        return text

    return answer


def record_searches(
    ctx: Context, log: JointSearchLog, iteration: int, index: int, parent_id: str, protocol: str
) -> None:
    """Write the candidate's joint-search record (one round per search) to D_search."""
    parent = ctx.store.get_program(parent_id)
    final = list(dict.fromkeys(d.doc_id for docs in log.results for d in docs))
    ctx.require_search_db().add_record(
        SearchRecord(
            record_id=f"jnt_{iteration:06d}_c{index}",
            iteration=iteration,
            parent_id=parent_id,
            parent_score=float(parent.score or 0.0),
            rounds=[
                RoundLog(
                    round=n,
                    queries=[q],
                    results=[RoundResult(doc_id=d.doc_id, url=d.url, title=d.title) for d in docs],
                    retained=[d.doc_id for d in docs],
                )
                for n, (q, docs) in enumerate(zip(log.queries, log.results, strict=True))
            ],
            final_doc_ids=final,
            decision="joint-search",
        )
    )
    ctx.events.emit(
        "joint_search",
        iteration=iteration,
        candidate_index=index,
        protocol=protocol,
        searches=len(log.queries),
        queries=log.queries,
        doc_ids=final,
        errors=log.errors,
    )


__all__ = [
    "JointSearchStep",
    "choose_protocol",
    "joint_answer",
    "native_tool_calling",
    "record_searches",
    "run_search",
]
