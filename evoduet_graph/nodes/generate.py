"""``generate`` node: one LLM call that turns the parent into a child program.

Runs once per ``Send("generate", GenerateInput)`` (N candidates in parallel). Builds the
OpenEvolve-style mutation prompt (the task instruction in the system message; the iteration's
context c_t first in the user message: parent program and metrics, top programs, inspirations,
the recent attempts with their outcomes (and, for all but invalid ones by default, errors,
changes and artifact tails: `evoduet_graph.prompts.generate.attempts_text`); then the optional
evidence block, the task line with the scaffold's optional strategy instruction), asks for
SEARCH/REPLACE diffs or a full rewrite, applies the answer to the parent and stores the child in
the program store. A model error, garbage text or a diff that does not apply yields an
``invalid``/``failed`` candidate, stored with its reason, whose outcome the next prompt shows
(the reason too with ``prompt.failed_attempts: details``); it never stops the run.

The prompt names the task's language and fences code with it (`evoduet_graph.tasks.languages`).
When the parent has no code (a task folder without an initial program), the model is asked
for a first complete program from the instruction (SkyDiscover's start from scratch,
`build_initial_messages`). A child longer than ``max_code_length`` characters (the task
config's ``max_code_length`` / ``max_solution_length``) is invalid with that reason, as in
OpenEvolve and SkyDiscover.

A folder program (`Task.is_folder`) is a bundle text (`evoduet_graph.candidates.bundle`): the
answer's per-file edits are applied by `evoduet_graph.candidates.folder_edits.folder_candidate`
(invalid reasons name the file; a path outside the folder is refused), every changed Python
file is compiled, the size limit applies to the whole bundle, and novelty compares the
evolvable files only (`novelty_text`).

Before a child goes on to ``evaluate`` it passes the run's novelty check (`Context.novelty`,
`evoduet_graph.candidates.novelty`): a near-duplicate of the parent or of a population program is
rejected with its reason (event ``novelty_rejected``); with ``novelty.resample`` the model is
asked once more with the same prompt, and a second rejection records the candidate as
``duplicate`` — stored with its code, never evaluated. An answer that leaves the parent as it
was (an identical rewrite, a diff that changes nothing: `left_parent_unchanged`) is the exact
duplicate of the parent and is resampled the same way (its ``novelty_rejected`` event is of
kind ``exact``, similar to the parent); a second unchanged answer stays ``invalid`` with its
reason, as it was without a resample.

With ``joint_search.enabled`` the first draft's model call is the joint-level search loop of
`evoduet_graph.nodes.joint_search` (the model may search before it writes the candidate); a
novelty resample is a plain call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from langgraph.runtime import Runtime

from evoduet_graph.candidates.bundle import unpack
from evoduet_graph.candidates.diffs import (
    UNCHANGED_REASONS,
    CandidateCode,
    candidate_from_response,
)
from evoduet_graph.candidates.folder_edits import (
    NO_FILE_CHANGED,
    FolderCandidate,
    FolderPolicy,
    folder_candidate,
    python_compile_errors,
)
from evoduet_graph.candidates.novelty import NoveltyVerdict
from evoduet_graph.config import NoveltyConfig
from evoduet_graph.context import Context
from evoduet_graph.llm import LLMCallError, LocalChatModel, invoke_text
from evoduet_graph.nodes._common import context_of, emit
from evoduet_graph.nodes.joint_search import joint_answer
from evoduet_graph.population import Population
from evoduet_graph.prompts.descriptor import (
    context_text,
    program_view,
    system_text,
    top_program_ids,
)
from evoduet_graph.prompts.generate import (
    DocumentView,
    build_generation_messages,
    build_initial_messages,
)
from evoduet_graph.rundir.store import ProgramRow, ProgramStore, code_sha
from evoduet_graph.state import CandidateRecord, CandidateStatus, GenerateInput
from evoduet_graph.task import Task


def candidate_id(iteration: int, index: int) -> str:
    """Id of candidate ``index`` of ``iteration``: ``it00012-c3``."""
    return f"it{iteration:05d}-c{index}"


def evidence_views(ctx: Context, payload: GenerateInput) -> list[DocumentView]:
    """Evidence documents for the prompt; full text comes from the search database."""
    docs = payload.get("documents") or []
    if not docs:
        return []
    lookup = ctx.search_db.document_text if ctx.search_db is not None else None
    return [
        DocumentView(
            id=d["id"],
            title=d["title"],
            url=d["url"],
            content=lookup(d["id"]) if lookup else "",
            predicted_score=d.get("predicted_score"),
        )
        for d in docs
    ]


def uses_diffs(ctx: Context) -> bool:
    """Resolve ``prompt.diff_based`` (None = auto: rewrites for the embedded local model)."""
    if ctx.config.prompt.diff_based is not None:
        return ctx.config.prompt.diff_based
    return not isinstance(ctx.model_for("generate"), LocalChatModel)


def compile_error(language: str, code: str) -> str | None:
    """Why a Python candidate cannot even be compiled, or None.

    Why a Python candidate cannot even be compiled, in the compiler's words (None when it
    compiles, or when the task's language is not Python: other languages are left to their
    evaluator). Such a candidate is rejected before evaluation, with this as its error.
    """
    if language.strip().lower() not in ("python", "py"):
        return None
    try:
        compile(code, "program.py", "exec", dont_inherit=True)
    except SyntaxError as exc:  # IndentationError / TabError included
        where = f" (line {exc.lineno}" if exc.lineno else ""
        if where and exc.text and exc.text.strip():
            where += f": {exc.text.strip()[:120]}"
        where += ")" if where else ""
        return f"the program does not compile: {type(exc).__name__}: {exc.msg}{where}"
    except ValueError as exc:  # e.g. a NUL byte in the source
        return f"the program does not compile: {exc}"
    return None


def folder_policy(task: Task) -> FolderPolicy:
    """What an answer may change in the task's folder program (task.yaml ``folder:``)."""
    return FolderPolicy(evolve_all=task.folder_evolve_all, new_files=task.folder_new_files)


def folder_size_error(bundle: str, limit: int) -> str:
    """The size-limit reason of a folder candidate, naming its largest file."""
    files = unpack(bundle)
    largest = max(files, key=lambda p: len(files[p]))
    return (
        f"the program folder is {len(bundle)} characters long, over the limit of {limit} "
        f"(max_code_length); its largest file is {largest} ({len(files[largest])} "
        "characters); make it shorter"
    )


def novelty_text(task: Task, code: str) -> str:
    """What the novelty check compares: the program, or a folder's evolvable files only.

    For a folder program the read-only files are equal in every candidate and would make
    every pair look alike; the check compares the bundle of the files the model may change.
    """
    if not task.is_folder:
        return code
    try:
        files = unpack(code)
    except ValueError:
        return code
    keep = folder_policy(task).evolvable(files)
    return "".join(f"### File: {p}\n{files[p]}" for p in keep) or code


def draft(
    ctx: Context,
    row: ProgramRow,
    messages: list[Any],
    parent_code: str,
    *,
    diff_based: bool,
    index: int,
    attempt: int,
    evidence: int = 0,
    answer: Any | None = None,
) -> None:
    """Ask the model for candidate ``row`` and fill in its code, kind, status and error.

    ``status`` becomes ``generated`` (code ready), ``invalid`` (no applicable code, or Python
    code that does not compile: `compile_error`) or ``failed`` (the model call raised).
    ``index`` (the candidate slot), ``attempt`` (0, or 1 for the novelty resample) and
    ``evidence`` (documents in the prompt) go into the call's metadata, with the iteration,
    candidate id and parent id. ``answer`` replaces the plain call of the ``generate`` role's
    model: ``(messages, config) -> text`` (joint-level in-loop search,
    `evoduet_graph.nodes.joint_search`, which calls that same model).
    """
    row.code, row.kind, row.status, row.error, row.artifacts = None, "none", "failed", None, {}
    try:
        config = ctx.llm_config(
            "generate",
            iteration=row.iteration,
            candidate=row.id,
            candidate_index=index,
            attempt=attempt,
            parent=row.parent_id,
            evidence=evidence,
        )
        if answer is not None:
            text = answer(messages, config)
        else:
            model = ctx.model_for("generate")
            text, _ = invoke_text(model, messages, config=config, retry=ctx.llm_retry("generate"))
    except LLMCallError as exc:  # a model fault fails this candidate only; a bug is raised
        row.error = f"LLM call failed: {type(exc).__name__}: {exc}"[:500]
        log_prompt(ctx, row, messages, None, attempt=attempt)
        return
    log_prompt(ctx, row, messages, text, attempt=attempt)
    if ctx.task.is_folder and parent_code:
        cand: CandidateCode | FolderCandidate = folder_candidate(
            parent_code, text, diff_based=diff_based, policy=folder_policy(ctx.task)
        )
    else:
        cand = candidate_from_response(
            parent_code,
            text,
            diff_based=diff_based and bool(parent_code),
            restrict_to_evolve_blocks=ctx.task.has_evolve_blocks and bool(parent_code),
            language=ctx.task.language,
        )
    row.kind = cand.kind
    limit = ctx.config.max_code_length
    problem = None
    if cand.code is not None and cand.error is None:
        if isinstance(cand, FolderCandidate):
            problem = python_compile_errors(cand.code, cand.changed)
        else:
            problem = compile_error(ctx.task.language, cand.code)
    if cand.code is not None and cand.error is None and limit and len(cand.code) > limit:
        row.code, row.status = cand.code, "invalid"
        row.error = (
            f"the program is {len(cand.code)} characters long, over the limit of {limit} "
            "(max_code_length); make it shorter"
        )
        if isinstance(cand, FolderCandidate):
            row.error = folder_size_error(cand.code, limit)
    elif cand.code is not None and cand.error is None and problem is None:
        row.code, row.status = cand.code, "generated"
    elif problem is not None:
        row.status, row.error = "invalid", problem
        row.artifacts = {"compile_error": problem, "llm_response_head": text[:600]}
    else:
        row.status, row.error = "invalid", cand.error or "no code in the response"
        row.artifacts = {"llm_response_head": text[:600]}


def log_prompt(
    ctx: Context, row: ProgramRow, messages: list[Any], reply: str | None, *, attempt: int
) -> None:
    """Write the call's prompt and reply to the run's prompt log (``prompts.jsonl``).

    What ``evoduet view`` shows beside each program (OpenEvolve keeps the same pair per program
    with ``log_prompts``); a call that failed is logged with its error and no reply.
    """
    if ctx.prompts is not None:
        ctx.prompts.write(
            iteration=row.iteration,
            candidate=row.id,
            parent=row.parent_id,
            attempt=attempt,
            messages=messages,
            reply=reply,
            error=row.error if reply is None else None,
        )


def population_references(
    config: NoveltyConfig,
    store: ProgramStore,
    population: Population,
    parent_id: str,
    shown_ids: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """The programs a candidate of ``parent_id`` is compared with, most relevant first.

    The parent; with ``compare_with: parent_and_population`` also ``shown_ids`` (the top
    programs and inspirations the prompt showed, which the model may copy) and then the
    population's best programs, up to ``config.max_compared`` programs besides the parent.
    Migrant copies are resolved to the program that holds their code (`Population.code_id`);
    each code id appears once.

    Returns:
        ``[(program id, code), ...]``; programs without code in the store are skipped.
    """
    ids: list[str] = [parent_id]
    if config.compare_with == "parent_and_population" and config.max_compared > 0:
        extra = list(shown_ids) + population.top(config.max_compared + len(shown_ids) + 1)
        for pid in extra:
            code_id = population.code_id(pid) if pid in population else pid
            if code_id not in ids:
                ids.append(code_id)
            if len(ids) > config.max_compared:
                break
    out = []
    for pid in ids:
        try:
            out.append((pid, store.get_code(pid)))
        except KeyError:
            continue
    return out


def check_novelty(
    ctx: Context,
    runtime: Any,
    row: ProgramRow,
    shown_ids: list[str],
    *,
    attempt: int,
    resampling: bool,
) -> NoveltyVerdict:
    """Run the novelty check on the generated ``row``.

    When it fails, write a ``novelty_rejected`` event (``attempt`` is 1-based; ``resampled``: the
    model is asked again) to the event log and the live progress stream. A check that raises (e.g. a
    remote embeddings service is down) lets the candidate through and writes ``novelty_error``.
    """
    assert ctx.novelty is not None and row.code is not None and row.parent_id is not None
    try:
        references = population_references(
            ctx.config.novelty, ctx.store, ctx.population, row.parent_id, shown_ids
        )
        verdict: NoveltyVerdict = ctx.novelty.check(
            novelty_text(ctx.task, row.code),
            [(pid, novelty_text(ctx.task, code)) for pid, code in references],
        )
    except Exception as exc:  # noqa: BLE001 - a faulty check must not stop the run
        ctx.events.emit(
            "novelty_error",
            iteration=row.iteration,
            candidate_id=row.id,
            error=f"{type(exc).__name__}: {exc}"[:500],
        )
        return NoveltyVerdict(novel=True)
    if not verdict.novel:
        _record_rejection(
            ctx, runtime, row, verdict, row.code, attempt=attempt, resampling=resampling
        )
    return verdict


def _record_rejection(
    ctx: Context,
    runtime: Any,
    row: ProgramRow,
    verdict: NoveltyVerdict,
    code: str,
    *,
    attempt: int,
    resampling: bool,
) -> None:
    """The ``novelty_rejected`` event of ``row`` (its code ``code``) judged by ``verdict``."""
    fields = {
        "iteration": row.iteration,
        "candidate_id": row.id,
        "attempt": attempt,
        "resampled": resampling,
        "code_sha": code_sha(code),
        **{k: v for k, v in verdict.as_event().items() if k != "novel"},
    }
    emit(ctx, runtime, "novelty_rejected", **fields)


def left_parent_unchanged(row: ProgramRow) -> bool:
    """Whether ``row``'s answer was rejected for leaving the parent as it was.

    A rewrite identical to the parent, a diff whose every REPLACE equals its SEARCH, a folder
    answer that changed no file (`UNCHANGED_REASONS`, `NO_FILE_CHANGED`): the most exact of
    near-duplicates, the parent itself.
    """
    return row.status == "invalid" and (row.error or "").startswith(
        (*UNCHANGED_REASONS, NO_FILE_CHANGED)
    )


def generation_messages(
    ctx: Context,
    parent: ProgramRow,
    inspiration_ids: list[str],
    iteration: int,
    payload: GenerateInput,
    diff_based: bool,
) -> list[Any]:
    """The mutation prompt for a child of ``parent``.

    The mutation prompt for a child of ``parent`` (`build_generation_messages`): the run's
    system message (`system_text`), then a user message starting with the iteration's context
    c_t (`context_text`: current program, top programs, inspirations, recent attempts), the
    prefix the gate's and the inner loop's prompts of this iteration start with too
    (llama.cpp and hosted prompt caches reuse it).
    """
    return build_generation_messages(
        system=system_text(ctx),
        context=context_text(ctx, parent.id, iteration, inspiration_ids),
        parent=program_view(ctx.store, parent.id),
        evidence=evidence_views(ctx, payload),
        cfg=ctx.config.prompt.model_copy(update={"diff_based": diff_based}),
        metric_name=ctx.task.metric,
        direction=ctx.task.direction,
        strategy_instruction=payload.get("mutation_instruction") or "",
        language=ctx.task.lang,
        folder_new_files=ctx.task.folder_new_files if ctx.task.is_folder else None,
    )


def generate(payload: GenerateInput, runtime: Runtime[Context]) -> dict[str, Any]:
    """Generate candidate ``payload["index"]`` of ``payload["iteration"]``.

    Returns:
        ``{"candidates": [CandidateRecord]}`` with status ``generated`` (code stored, goes on
        to ``evaluate``), ``invalid`` (no applicable code), ``failed`` (the model call raised)
        or ``duplicate`` (rejected by the novelty check, after the one resample when
        ``novelty.resample``; the reason is in ``error``).
    """
    ctx = context_of(runtime)
    iteration, index = payload["iteration"], payload["index"]
    cid = candidate_id(iteration, index)
    parent = ctx.store.get_program(payload["parent_id"])
    parent_code = parent.code or ""
    top_ids = top_program_ids(ctx, parent.id)
    inspiration_ids = [pid for pid in payload["inspiration_ids"] if pid != parent.id]
    diff_based = uses_diffs(ctx)
    messages = (
        generation_messages(ctx, parent, inspiration_ids, iteration, payload, diff_based)
        if parent_code.strip()
        else build_initial_messages(
            instruction=ctx.task.instruction,
            metric_name=ctx.task.metric,
            direction=ctx.task.direction,
            language=ctx.task.lang,
        )
    )
    row = ProgramRow(
        id=cid,
        code=None,
        parent_id=parent.id,
        iteration=iteration,
        generation=parent.generation + 1,
        kind="none",
        status="failed",
    )
    answer = (
        joint_answer(ctx, iteration, index, parent.id) if ctx.config.joint_search.enabled else None
    )
    attempt_draft = functools.partial(
        draft,
        ctx,
        row,
        messages,
        parent_code,
        diff_based=diff_based,
        index=index,
        evidence=len(payload["documents"]),
    )
    attempt_draft(attempt=0, answer=answer)
    resample = ctx.novelty is not None and bool(getattr(ctx.novelty, "resample", False))
    resampled = False
    if resample and left_parent_unchanged(row):  # the parent itself: resampled likewise
        unchanged = NoveltyVerdict(
            novel=False,
            kind="exact",
            reason=f"the answer left the parent unchanged ({row.error})",
            similar_to=parent.id,
            similarity=1.0,
            compared=1,
        )
        _record_rejection(ctx, runtime, row, unchanged, parent_code, attempt=1, resampling=True)
        attempt_draft(attempt=1)  # the novelty resample: same prompt, no joint answer
        resampled = True
    if row.status == "generated" and ctx.novelty is not None:
        shown = [*top_ids, *inspiration_ids]
        first = 2 if resampled else 1
        verdict = check_novelty(
            ctx, runtime, row, shown, attempt=first, resampling=resample and not resampled
        )
        if not verdict.novel and resample and not resampled:
            attempt_draft(attempt=1)  # the novelty resample: same prompt, no joint answer
            if row.status == "generated":
                verdict = check_novelty(ctx, runtime, row, shown, attempt=2, resampling=False)
        if row.status == "generated" and not verdict.novel:
            row.status, row.error = "duplicate", f"near-duplicate: {verdict.reason}"
    ctx.store.put_program(row)
    status = cast(CandidateStatus, row.status)  # set above to one of the candidate statuses
    record = CandidateRecord(
        id=cid, index=index, status=status, score=None, valid=False, error=row.error
    )
    return {"candidates": [record]}
