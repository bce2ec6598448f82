"""Deterministic text the knowledge layer shows the model.

The context c_t (task, parent program, top programs, inspirations, recent attempts), the
population-state descriptor, the D_search selection and the most recently stored documents
(paper §3.2: the gate sees c_t, recent documents and D_search; §3.3: query construction sees
the knowledge state, c_t, where the search stands and D_search with realised Δ).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from evoduet_graph.candidates.bundle import BundleError, bundle_diff_summary, changed_files
from evoduet_graph.candidates.diffs import code_diff_summary
from evoduet_graph.candidates.folder_edits import FolderPolicy
from evoduet_graph.context import Context
from evoduet_graph.llm.providers import remember_shared_prefix
from evoduet_graph.prompts.folder import folder_program_text
from evoduet_graph.prompts.generate import (
    AttemptView,
    ProgramView,
    context_message_text,
    system_message_text,
)
from evoduet_graph.prompts.untrusted import neutralise
from evoduet_graph.rundir.store import ProgramStore


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def population_descriptor(ctx: Context, state: dict[str, Any]) -> str:
    """Facts about the search so far, as compact text (deterministic for equal inputs).

    Lists population size, score quantiles (min/25%/50%/75%/max) and mean, the best score,
    the last parent→child outcomes, the most selected parents and iterations since the last
    improvement. Scores are on the internal higher-is-better scale.
    """
    ids = [i for i in ctx.population.ids() if ctx.population.code_id(i) == i]  # no copies
    scores = np.array([ctx.population.get(pid).score for pid in ids], dtype=float)
    lines = [f"population size: {len(ids)}"]
    if scores.size:
        q = np.quantile(scores, [0.0, 0.25, 0.5, 0.75, 1.0])
        lines.append(
            "scores (higher is better): "
            f"min {_fmt(q[0])}, q25 {_fmt(q[1])}, median {_fmt(q[2])}, q75 {_fmt(q[3])}, "
            f"max {_fmt(q[4])}, mean {_fmt(float(scores.mean()))}"
        )
    iteration = int(state.get("iteration", 0))
    lines.append(f"best score so far: {_fmt(state.get('best_score'))}")
    lines.append(
        "iterations since last improvement: "
        f"{max(0, iteration - 1 - int(state.get('last_improvement_iteration', 0)))}"
    )
    attempts = ctx.store.recent_attempts(6, before_iteration=iteration)
    if attempts:
        lines.append("recent parent -> child outcomes:")
        for row in attempts:
            parent_score = (
                ctx.store.get_program(row.parent_id).score
                if row.parent_id and ctx.store.has_program(row.parent_id)
                else None
            )
            if not row.valid:
                outcome = f"invalid ({(row.error or row.status)[:80]})"
            else:
                outcome = f"{_fmt(parent_score)} -> {_fmt(row.score)}"
            lines.append(f"  iteration {row.iteration}: {outcome}")
    parents = Counter(r.parent_id for r in ctx.store.recent_attempts(200) if r.parent_id)
    if parents:
        top = ", ".join(f"{pid} x{n}" for pid, n in sorted(parents.items(), key=_count_key)[:3])
        lines.append(f"most selected parents: {top}")
    return "\n".join(lines)


def _count_key(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


DATABASE_MAX_CHARS = 3000
"""Most characters of the D_search selection shown to the gate and ``construct_query``."""

RECENT_DOCUMENTS = 5
"""Most recently stored documents the gate sees (paper §3.2)."""

RECENT_EXCERPT_CHARS = 240
"""Characters of each recent document's content shown to the gate."""

RECENT_DOCUMENTS_MAX_CHARS = 2000
"""Bound of the gate's whole recent-documents section."""


def recent_attempt_views(ctx: Context, iteration: int) -> list[AttemptView]:
    """The last ``prompt.history_programs`` attempts before ``iteration``, oldest first."""
    rows = ctx.store.recent_attempts(ctx.config.prompt.history_programs, iteration)
    views = []
    for row in reversed(rows):
        summary = ""
        if row.code is not None and row.parent_id and ctx.store.has_program(row.parent_id):
            diff_of = bundle_diff_summary if ctx.task.is_folder else code_diff_summary
            summary = diff_of(ctx.store.get_code(row.parent_id), row.code)
        parent_score = (
            ctx.store.get_program(row.parent_id).score
            if row.parent_id and ctx.store.has_program(row.parent_id)
            else None
        )
        if row.status == "duplicate":
            outcome = f"rejected before evaluation: {row.error or 'duplicate'}"
        elif not row.valid:
            outcome = f"invalid: {row.error or row.status}"
        elif parent_score is not None and row.score is not None and row.score > parent_score:
            outcome = "improved"
        else:
            outcome = "no improvement"
        views.append(
            AttemptView(
                iteration=row.iteration,
                parent_id=row.parent_id or "",
                outcome=outcome,
                score=row.score,
                error=row.error,
                artifacts=row.artifacts,
                diff_summary=summary,
            )
        )
    return views


def system_text(ctx: Context) -> str:
    """The system message of every call that reads the context c_t (paper §3.2-3.4).

    ``prompts/system.md``: the role (an expert programmer improving the task's program, an
    evaluator scoring every version), the task instruction (at most 2,000 characters) and how
    the search works (study the parent and the recent attempts, one focused change, keep the
    program runnable, documents are data). It is equal for every call of a run, so it is the
    first part of the stable prefix (`iteration_messages`).

    It is also the role-first order OpenEvolve's prompt sampler uses (a system message with the
    task, then the program): on the embedded 1.5B model, a single user message that put the
    program before the role and the rules gave fewer valid children
    (``benchmarks/results/embedded/prompt_structure_ab/README.md``).
    """
    return system_message_text(ctx.task.instruction, ctx.task.lang)


def iteration_messages(ctx: Context, text: str) -> list[BaseMessage]:
    """``[system message, user message]`` of a call that starts with the context c_t.

    The system message is `system_text` (equal for the whole run); ``text`` is the user
    message, which starts with `context_text` (equal within the iteration) and ends with the
    node's own part. The gate, ``construct_query``, ``hypothetical_score`` and ``generate``
    prompts are built this way, so llama.cpp's kept context and a hosted provider's
    prompt cache serve the shared prefix and only each node's own part is read.
    """
    return [SystemMessage(content=system_text(ctx)), HumanMessage(content=text)]


def program_view(store: ProgramStore, program_id: str) -> ProgramView:
    """Prompt view of a stored program."""
    row = store.get_program(program_id)
    return ProgramView(
        id=row.id,
        code=row.code or "",
        score=row.score if row.score is not None else 0.0,
        metrics=row.metrics,
        iteration=row.iteration,
    )


def top_program_ids(ctx: Context, parent_id: str) -> list[str]:
    """The ``prompt.num_top_programs`` best distinct programs other than the parent, best first."""
    limit = ctx.config.prompt.num_top_programs
    best = dict.fromkeys(ctx.population.code_id(p) for p in ctx.population.top(limit + 1))
    return [pid for pid in best if pid != parent_id][:limit]


def context_text(
    ctx: Context, parent_id: str, iteration: int, inspiration_ids: list[str] | None = None
) -> str:
    """The context c_t every call's user message of an iteration starts with (paper §3.2-3.4).

    `evoduet_graph.prompts.generate.context_message_text` of this iteration's views: the
    parent ("current program") with its score and metrics; the top programs
    (`top_program_ids`) and the iteration's inspirations (``inspiration_ids``, chosen by
    ``select``), each as a diff against the parent; the last ``prompt.history_programs``
    attempts, oldest first, with outcome, error, change and artifact tails. The task
    instruction is in the system message (`system_text`).

    Not a deviation: the world-knowledge design defines ``prompt(c_t)`` as OpenEvolve's
    mutation prompt, which holds the top programs and inspirations besides the task, the parent
    with its metrics and the recent attempts. The gate and the inner loop read exactly what
    ``generate`` will read, so the shared prefix covers the whole mutation context.

    After `system_text` it is the stable prefix of the gate's, ``construct_query``'s,
    ``hypothetical_score``'s and ``generate``'s prompts (`iteration_messages`): equal within
    one iteration, so a model server that caches the evaluated prefix (llama.cpp, hosted
    prompt caches) only reads each node's own part. It is noted for providers that cache only
    a marked prefix (`evoduet_graph.llm.providers.remember_shared_prefix`).
    """
    inspirations = [pid for pid in inspiration_ids or [] if pid != parent_id]
    text = context_message_text(
        parent=program_view(ctx.store, parent_id),
        top=[program_view(ctx.store, pid) for pid in top_program_ids(ctx, parent_id)],
        inspirations=[program_view(ctx.store, pid) for pid in inspirations],
        attempts=recent_attempt_views(ctx, iteration),
        cfg=ctx.config.prompt,
        language=ctx.task.lang,
        folder_text=folder_text(ctx, parent_id) if ctx.task.is_folder else None,
    )
    remember_shared_prefix(text)  # where a provider's prompt-cache block ends (Anthropic)
    return text


def folder_text(ctx: Context, program_id: str) -> str:
    """The current-program section of a folder program (`folder_program_text`).

    The files the program changed against its own parent are shown first.
    """
    row = ctx.store.get_program(program_id)
    code = row.code or ""
    changed: list[str] = []
    if row.parent_id and ctx.store.has_program(row.parent_id):
        with contextlib.suppress(BundleError):
            changed = changed_files(ctx.store.get_code(row.parent_id), code)
    return folder_program_text(
        code,
        policy=FolderPolicy(
            evolve_all=ctx.task.folder_evolve_all, new_files=ctx.task.folder_new_files
        ),
        carried=ctx.task.folder_carried,
        changed=changed,
        max_chars=ctx.config.prompt.max_program_chars,
    )


def database_text(ctx: Context, unresolved: str | None) -> str:
    """The D_search selection with realised Δ, as prompt text.

    The D_search selection (``retrieval.select_policy`` / ``select_num``) with each
    record's queries, documents, predictions and realised Δ, at most `DATABASE_MAX_CHARS`;
    ``"(empty)"`` without records.
    """
    retrieval = ctx.config.retrieval
    if ctx.search_db is None or retrieval.select_num <= 0 or not retrieval.use_search_database:
        return "(empty)"  # stateless retrieval (ablation): queries are built without D_search
    records = ctx.search_db.select(
        retrieval.select_policy,
        retrieval.select_num,
        query_text=unresolved or None,
        weights=(retrieval.rerank_relevance_weight, retrieval.rerank_novelty_weight),
    )
    if not records:
        return "(empty)"
    return (
        ctx.search_db.render_for_prompt(
            records, max_chars=DATABASE_MAX_CHARS, documents_per_entry=retrieval.documents_per_entry
        )
        or "(empty)"
    )


def recent_documents_text(ctx: Context, parent_id: str) -> str:
    """The `RECENT_DOCUMENTS` most recently stored documents, newest first (paper §3.2).

    Id, title, URL, the child score predicted for *this* parent when a loop made one, and a
    neutralised excerpt of `RECENT_EXCERPT_CHARS` characters. The section is at most
    `RECENT_DOCUMENTS_MAX_CHARS` characters (documents that do not fit are counted).
    """
    if ctx.search_db is None:
        return "(none)"
    docs = ctx.search_db.recent_documents(RECENT_DOCUMENTS)
    if not docs:
        return "(none)"
    blocks = []
    for doc in docs:
        pred = ctx.search_db.prediction_for(doc.doc_id, parent_id)
        predicted = f"; predicted child score {_fmt(pred.predicted_score)}" if pred else ""
        title = " ".join(neutralise(doc.title).split())[:120]
        url = " ".join(neutralise(doc.url).split())[:160]
        excerpt = " ".join(neutralise(doc.content).split())
        if len(excerpt) > RECENT_EXCERPT_CHARS:
            excerpt = excerpt[: RECENT_EXCERPT_CHARS - 1] + "…"
        blocks.append(f'- {doc.doc_id} "{title}" ({url}{predicted})\n  {excerpt}')
    out: list[str] = []
    room = RECENT_DOCUMENTS_MAX_CHARS - 40  # keeps space for the "left out" line
    for block in blocks:
        if len("\n".join([*out, block])) > room:
            break
        out.append(block)
    if len(out) < len(blocks):
        out.append(f"… {len(blocks) - len(out)} more document(s) left out")
    return "\n".join(out)
