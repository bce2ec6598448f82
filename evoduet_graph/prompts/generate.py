"""The mutation prompt of the ``generate`` node (OpenEvolve's prompt sampler, made compact).

OpenEvolve (``openevolve/prompt/sampler.py``) sends a system message (the task's instruction)
and a user message with the current program and its metrics, the evolution history (previous
attempts and their outcome), the top programs and "inspiration" programs in full, the
evaluator's artifacts, and the diff or rewrite format. This module keeps that content with
four changes that matter for a 1.5B model with a small context on a CPU:

* **One stable prefix**: the prompt is OpenEvolve's system + user pair, ordered so
  that every call of an iteration starts with the same text. The system message
  (``prompts/system.md``: role, task instruction, how to work) is equal for the whole run; the
  user message starts with the iteration's context c_t (`context_message_text`,
  ``prompts/context.md``: current program and metrics, top programs, inspirations, recent
  attempts), the text the gate, ``construct_query`` and ``hypothetical_score`` user messages
  start with too; the mutation's own part (evidence, task, output format) comes after it. A
  model server that keeps the evaluated prefix (llama.cpp's context, a hosted provider's prompt
  cache) then reads each later call's own part only. With no evidence and no strategy the
  messages are byte for byte the mutation prompt from before the shared prefix (tested): with the
  sequential sampler, seeded gate-never runs write the same children call by call as that tree
  (``benchmarks/results/embedded/shared-context/README.md``).
* Only the parent program is shown in full. Top programs and inspirations are shown as unified
  diffs against it (at most 30 diff lines each), which is both shorter and says exactly what
  they do differently; ``prompt.other_programs: code`` shows them in full, as OpenEvolve does
  (``prompts/context_code.md``). On the embedded model the two forms gave the same children
  where a diff seemed to be replayed wrongly (``benchmarks/context_ab.py``).
* Recent attempts (`attempts_text`) show the outcome, the error, the change made and the
  *tails* of the evaluator's artifacts (stderr and tracebacks end with the useful part); an
  invalid attempt shows its outcome only (``prompt.failed_attempts: outcome``, the default,
  as OpenEvolve's history does): shown its failed code and traceback, the embedded model
  wrote the same failure again (``benchmarks/results/local/attempts_ab/README.md``).
* Retrieved evidence sits after the recent attempts, inside ``<evidence>`` tags, with a note
  that it is data; its text is neutralised so it cannot close the tags or a fence.

A rewrite of a parent with exactly one EVOLVE-BLOCK asks for the block's new code only
(``format_rewrite_block.md``: the model writes no copy of the fixed code, and
`evoduet_graph.candidates.diffs.extract_rewrite` splices the block in, rule 3); other rewrites
ask for the whole program (``format_rewrite.md``).

The text lives in ``prompts/context.md``, ``generate_user.md``, ``generate_evidence.md``,
``format_diff.md``, ``format_rewrite.md`` and ``format_rewrite_block.md`` (`string.Template`
syntax, see `evoduet_graph.prompts`); ``system.md`` and ``generate_initial.md`` ask for a first
program when there is no parent. A template section (from one Markdown heading to the next)
whose placeholders are all empty is left out, and so is a line holding only an empty
placeholder. Output is a pure function of the inputs: equal inputs give byte-identical
messages (metrics are sorted by name; list order is the caller's).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from evoduet_graph.candidates.bundle import bundle_diff_summary
from evoduet_graph.candidates.diffs import code_diff_summary, evolve_marker_lines, evolve_regions
from evoduet_graph.config import PromptConfig
from evoduet_graph.prompts import load_prompt
from evoduet_graph.prompts.folder import FOLDER_EDIT_SCOPE, folder_output_format
from evoduet_graph.prompts.render import render
from evoduet_graph.prompts.untrusted import neutralise
from evoduet_graph.tasks.languages import Language, language_by_name

__all__ = [
    "AttemptView",
    "DocumentView",
    "ProgramView",
    "build_generation_messages",
    "build_initial_messages",
    "context_message_text",
    "fenced",
    "system_message_text",
]

_OTHER_PROGRAM_DIFF_LINES = 30
_MAX_METRICS = 12
_MAX_ERROR_CHARS = 600
_MAX_OUTCOME_CHARS = 200
_MAX_TITLE_CHARS = 200
_MAX_URL_CHARS = 300
_MAX_STRATEGY_CHARS = 600
_NO_CHANGE = "(no change)"
_EDIT_SCOPE = (
    "Change only the code between `{start}` and `{end}`; everything outside these markers is fixed."
)
_PYTHON_IMPORT_RULE = (
    " Put a new import between the markers too (one added outside them is moved there)."
)
_PYTHON_BLOCK_IMPORT_RULE = " Put a new import at the top of the block."
_MAXIMIZE = {"max", "maximize", "maximise", "maximum", "higher", "higher_is_better", "up"}
_MINIMIZE = {"min", "minimize", "minimise", "minimum", "lower", "lower_is_better", "down"}

_BACKTICK_RUN_RE = re.compile(r"`+")


@dataclass(frozen=True)
class ProgramView:
    """A program as the prompt shows it.

    Attributes:
        id: Program id.
        code: Full source.
        score: Fitness on the internal higher-is-better scale (``None``: unknown).
        metrics: The evaluator's metrics (name → value).
        iteration: Iteration that produced the program (0: the initial program).
    """

    id: str
    code: str
    score: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    iteration: int = 0


@dataclass(frozen=True)
class AttemptView:
    """One recent candidate and what became of it.

    Attributes:
        iteration: Iteration of the attempt.
        parent_id: Id of the program it edited.
        outcome: ``"improved"``, ``"no improvement"`` or ``"invalid: <reason>"``.
        score: Its score (higher is better), ``None`` when not evaluated.
        error: Why it failed (diff that did not apply, exception, timeout), else ``None``.
        artifacts: Evaluator artifacts (name → text), e.g. ``stderr``, ``traceback``.
        diff_summary: `evoduet_graph.candidates.diffs.code_diff_summary` of parent → attempt,
            or ``""``.
    """

    iteration: int
    parent_id: str
    outcome: str
    score: float | None = None
    error: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    diff_summary: str = ""


@dataclass(frozen=True)
class DocumentView:
    """A retrieved evidence document.

    Attributes:
        id: Stable document id (``doc_000001``).
        title: Page title.
        url: Source URL.
        content: Extracted text (untrusted).
        predicted_score: Score the inner loop predicted for a child built from it, if any.
    """

    id: str
    title: str
    url: str
    content: str
    predicted_score: float | None = None


# --------------------------------------------------------------------------------------------
# Formatting helpers
# --------------------------------------------------------------------------------------------


def _fmt(value: object) -> str:
    """A number as a short, stable string (6 significant digits)."""
    if isinstance(value, (bool, int)):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    return _one_line(str(value), 60)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _metrics_line(metrics: Mapping[str, object]) -> str:
    names = sorted(metrics)
    shown = ", ".join(f"{name}={_fmt(metrics[name])}" for name in names[:_MAX_METRICS])
    if len(names) > _MAX_METRICS:
        shown += f", ... ({len(names) - _MAX_METRICS} more)"
    return shown


def _score(value: float | None) -> str:
    return "n/a" if value is None else _fmt(value)


def fenced(text: str, lang: str = "") -> str:
    """Wrap ``text`` in a backtick fence it cannot close.

    Wrap ``text`` in a backtick fence (info string ``lang``) longer than any backtick run
    inside it, so the text cannot close the fence.
    """
    longest = max((len(run) for run in _BACKTICK_RUN_RE.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text.rstrip("\n")
    return f"{fence}{lang}\n{body}\n{fence}"


def _head(text: str, limit: int, note: str) -> str:
    """The first ``limit`` characters (cut at a line end when possible) plus a note."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    if "\n" in cut:
        cut = cut[: cut.rindex("\n")]
    return f"{cut}\n{note.format(n=len(text) - len(cut))}"


def _tail(text: str, limit: int) -> str:
    """The last ``limit`` characters, starting at a line start when possible."""
    if len(text) <= limit:
        return text
    cut = text[len(text) - limit :]
    if "\n" in cut[:-1]:
        cut = cut[cut.index("\n") + 1 :]
    return cut


def _strategy_line(instruction: str) -> str:
    """The task line of a scaffold's strategy instruction (``""`` when there is none)."""
    text = neutralise(_one_line(instruction, _MAX_STRATEGY_CHARS))
    return f"Search strategy for this step: {text}" if text else ""


def _direction_phrase(direction: str) -> str:
    key = direction.strip().lower().replace("-", "_").replace(" ", "_")
    if key in _MAXIMIZE:
        return "higher is better"
    if key in _MINIMIZE:
        return "lower is better, so the score rises as it falls"
    return f"direction: {_one_line(direction, 40) or 'unspecified'}"


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _other_programs(
    programs: list[ProgramView],
    parent: ProgramView,
    skip: set[str],
    limit: int,
    max_chars: int,
    folder: bool = False,
    code_lang: Language | None = None,
) -> tuple[str, set[str]]:
    """Programs as diffs against the parent; skips the parent, ``skip`` ids and clones.

    ``folder``: the programs are folder bundles, diffed file by file (`bundle_diff_summary`).
    ``code_lang``: show each program's code in full instead (``prompt.other_programs:
    code``), fenced for that language and cut at ``max_chars``, as OpenEvolve does.
    """
    summary = bundle_diff_summary if folder else code_diff_summary
    parts: list[str] = []
    shown: set[str] = set()
    for program in programs:
        if len(parts) >= limit:
            break
        if program.id == parent.id or program.id in skip or program.id in shown:
            continue
        diff = summary(parent.code, program.code, max_lines=_OTHER_PROGRAM_DIFF_LINES)
        if diff == _NO_CHANGE:
            continue
        body = other_program_body(program.code, diff, max_chars, code_lang)
        parts.append(f"{program_heading(program)}\n{body}")
        shown.add(program.id)
    return "\n\n".join(parts), shown


def program_heading(program: ProgramView) -> str:
    """A top program's or an inspiration's heading: id, iteration, score and metrics."""
    head = f"### {program.id} (iteration {program.iteration}, score {_score(program.score)})"
    if program.metrics:
        head += f"\nMetrics: {_metrics_line(program.metrics)}"
    return head


def other_program_body(code: str, diff: str, max_chars: int, code_lang: Language | None) -> str:
    """A top program's or an inspiration's fenced body: its diff, or with ``code_lang`` its code."""
    if code_lang is None:
        return fenced(_head(diff, max_chars, "... ({n} more characters)"), "diff")
    note = "... ({n} more characters not shown)"
    shown = _head(code, max_chars, f"# {note}" if code_lang.is_python else note)
    return fenced(shown, code_lang.fence)


def attempts_text(attempts: list[AttemptView], cfg: PromptConfig) -> str:
    """The last ``cfg.history_programs`` of ``attempts`` (oldest first), one block each.

    Each block: iteration, parent and outcome (with the score), the error (600 chars), the
    change as a diff summary and the artifact tails (``cfg.max_artifact_chars``, the change
    capped at the same size, the artifacts sharing it). An invalid attempt (it did not run,
    crashed or failed the evaluator's checks) is its first line only with
    ``cfg.failed_attempts: outcome`` (the default), as OpenEvolve's history gives a failed
    attempt's outcome, not its code or traceback. ``""`` when there is none to show.
    This is the recent-attempts part of the context c_t
    (`evoduet_graph.prompts.descriptor.context_text`).
    """
    recent = attempts[-cfg.history_programs :] if cfg.history_programs > 0 else []
    return "\n\n".join(_attempt(a, cfg) for a in recent)


def _attempt(attempt: AttemptView, cfg: PromptConfig) -> str:
    outcome = attempt.outcome.strip()
    error = (attempt.error or "").strip()
    if error and outcome.endswith(error):  # "invalid: <error>" — show the error once
        outcome = outcome[: len(outcome) - len(error)].rstrip(" :") or "invalid"
    head = f"### Iteration {attempt.iteration}, from {attempt.parent_id}: "
    head += _one_line(outcome, _MAX_OUTCOME_CHARS)
    if attempt.score is not None:
        head += f" (score {_fmt(attempt.score)})"
    parts = [head]
    if cfg.failed_attempts == "outcome" and attempt.outcome.startswith("invalid"):
        return head  # OpenEvolve's history: what became of it, not its code or traceback
    if error:
        parts.append("Error: " + _head(error, _MAX_ERROR_CHARS, "... ({n} more characters)"))
    summary = attempt.diff_summary.strip()
    if summary and summary != _NO_CHANGE and cfg.max_artifact_chars > 0:
        body = _head(summary, cfg.max_artifact_chars, "... ({n} more characters)")
        parts.append("Change:\n" + fenced(body, "diff"))
    artifacts = [(k, v) for k, v in sorted(attempt.artifacts.items()) if str(v).strip()]
    if artifacts and cfg.max_artifact_chars > 0:
        budget = max(1, cfg.max_artifact_chars // len(artifacts))
        for name, value in artifacts:
            text = str(value).replace("\r\n", "\n").rstrip()
            label = f"{name}:" if len(text) <= budget else f"{name} (last {budget} characters):"
            parts.append(f"{label}\n{fenced(_tail(text, budget))}")
    return "\n".join(parts)


def _parent_summary(parent: ProgramView) -> str:
    text = f"Program {parent.id} (iteration {parent.iteration}). Score: {_score(parent.score)}."
    if parent.metrics:
        text += f"\nMetrics: {_metrics_line(parent.metrics)}"
    return text


def context_message_text(
    *,
    parent: ProgramView,
    top: list[ProgramView],
    inspirations: list[ProgramView],
    attempts: list[AttemptView],
    cfg: PromptConfig,
    language: Language | None = None,
    folder_text: str | None = None,
) -> str:
    """The context c_t as the user message of every call of an iteration starts with it.

    ``prompts/context.md``, in the mutation prompt's order from before the shared prefix (the
    content of OpenEvolve's prompt, in another order): the current program (id, iteration, score,
    sorted metrics, code cut at ``cfg.max_program_chars``); the top programs (the first
    ``cfg.num_top_programs`` of ``top`` that are not the parent and differ from it) and the
    inspirations (the first ``cfg.num_inspirations`` not shown yet), each as a diff against the
    parent, or with ``cfg.other_programs: code`` in full (``prompts/context_code.md``, as
    OpenEvolve shows them); the recent attempts (`attempts_text`). Empty sections are left
    out. The mutation prompt's own part (`build_generation_messages`) follows it.
    ``folder_text`` (a folder program, `evoduet_graph.prompts.folder.folder_program_text`)
    stands in for the fenced code, and the other programs are then diffed file by file.

    Returns:
        The text; identical inputs give identical text.
    """
    lang = language or language_by_name("python")
    note = "... ({n} more characters not shown)"
    code = _head(parent.code, cfg.max_program_chars, f"# {note}" if lang.is_python else note)
    folder = folder_text is not None
    code_lang = lang if cfg.other_programs == "code" and not folder else None
    top_text, shown = _other_programs(
        top, parent, set(), cfg.num_top_programs, cfg.max_program_chars, folder, code_lang
    )
    inspiration_text, _ = _other_programs(
        inspirations, parent, shown, cfg.num_inspirations, cfg.max_program_chars, folder, code_lang
    )
    return render(
        "context" if code_lang is None else "context_code",
        drop_empty=True,
        parent_summary=_parent_summary(parent),
        parent_code=folder_text if folder_text is not None else fenced(code, lang.fence),
        top_programs=top_text,
        inspirations=inspiration_text,
        attempts=attempts_text(attempts, cfg),
    ).rstrip("\n")


def _document(doc: DocumentView, cfg: PromptConfig) -> str:
    doc_id = re.sub(r"[^\w.:-]", "_", doc.id)[:64] or "doc"
    lines = [f'<document id="{doc_id}">']
    title = neutralise(_one_line(doc.title, _MAX_TITLE_CHARS))
    url = neutralise(_one_line(doc.url, _MAX_URL_CHARS))
    if title:
        lines.append(f"Title: {title}")
    if url:
        lines.append(f"URL: {url}")
    if doc.predicted_score is not None:
        lines.append(f"Predicted score of a program using it: {_fmt(doc.predicted_score)}")
    content = neutralise(doc.content).strip()
    lines.append(_head(content, cfg.max_document_chars, "[... {n} more characters]"))
    lines.append("</document>")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def build_generation_messages(
    *,
    system: str,
    context: str,
    parent: ProgramView,
    evidence: list[DocumentView],
    cfg: PromptConfig,
    metric_name: str,
    direction: str,
    strategy_instruction: str = "",
    language: Language | None = None,
    folder_new_files: bool | None = None,
) -> list[BaseMessage]:
    """The messages that ask the model for one improved child program.

    The system message ``system`` (`system_message_text`: role, task, how to work), then one
    user message: ``context`` (`context_message_text`: the current program, top programs,
    inspirations and recent attempts; the stable prefix every call of the iteration starts
    with), then ``prompts/generate_user.md``: the evidence documents
    (``cfg.max_document_chars`` each, neutralised, inside ``<evidence>``); the task (score is
    higher-is-better; ``metric_name`` and ``direction`` as the task reports them; the
    EVOLVE-BLOCK rule when the parent has markers; the scaffold's strategy instruction, when
    given, as one more line of the task); the output format (``format_diff.md`` when
    ``cfg.diff_based``, else ``format_rewrite_block.md`` for a parent with exactly one
    EVOLVE-BLOCK and ``format_rewrite.md`` otherwise). Empty sections are left out: without a
    strategy instruction the messages are byte-identical to those of a caller that never
    passes one.

    Args:
        system: the system message (`system_message_text`; the run's
            `evoduet_graph.prompts.descriptor.system_text`).
        context: the iteration's context c_t (`evoduet_graph.prompts.descriptor.context_text`); it
            shows the parent's code, so this message does not repeat it.
        parent: The program to improve (its EVOLVE-BLOCK markers choose the edit rule and
            the rewrite format).
        evidence: Retrieved documents, in the order to show them.
        cfg: Prompt settings.
        metric_name: The task's reported metric, e.g. ``sum_radii``.
        direction: ``maximize``/``minimize`` (also ``max``/``min``, ``higher``/``lower``).
        strategy_instruction: what the scaffold asks for this iteration (EvoX strategy), or
            ``""``; model-written, so it is collapsed to one line (at most 600 characters)
            and neutralised like evidence text.
        language: the program's language (default Python): the tag of the requested
            rewrite's code fence; the EVOLVE-BLOCK rule quotes the parent's
            own marker lines (any comment syntax).
        folder_new_files: None for a single-file program; for a folder program whether
            answers may create files: the task line then states the folder's edit rule and
            the output format is ``format_folder.md`` (`evoduet_graph.prompts.folder`).

    Returns:
        ``[SystemMessage, HumanMessage]``; identical inputs give identical messages.
    """
    lang = language or language_by_name("python")
    evidence_text = ""
    if evidence:
        evidence_text = render(
            "generate_evidence",
            drop_empty=True,
            documents="\n\n".join(_document(doc, cfg) for doc in evidence),
        )
    job = render(
        "generate_user",
        drop_empty=True,
        evidence=evidence_text,
        metric_name=_one_line(metric_name, 80) or "score",
        metric_direction=_direction_phrase(direction),
        edit_scope=_edit_scope(parent.code) if folder_new_files is None else FOLDER_EDIT_SCOPE,
        strategy_instruction=_strategy_line(strategy_instruction),
        output_format=(
            _output_format(
                cfg.diff_based is not False, lang, parent.code, block=cfg.rewrite_scope == "block"
            )
            if folder_new_files is None
            else folder_output_format(
                diff_based=cfg.diff_based is not False, new_files=folder_new_files
            )
        ),
    )
    return [SystemMessage(content=system), HumanMessage(content=f"{context.rstrip()}\n\n{job}")]


def build_initial_messages(
    *, instruction: str, metric_name: str, direction: str, language: Language
) -> list[BaseMessage]:
    """Messages that ask the model for a first program when the task folder has none.

    SkyDiscover starts such tasks "from scratch" (its ``from_scratch_user_message`` template):
    the first iteration asks for a complete program from the instruction alone. The system
    message is the generation prompt's; the user message is ``prompts/generate_initial.md``
    (a full program in one code block of the task's language).

    Returns:
        ``[SystemMessage, HumanMessage]``.
    """
    user = render(
        "generate_initial",
        drop_empty=True,
        language_name=language.display,
        fence=language.fence,
        metric_name=_one_line(metric_name, 80) or "score",
        metric_direction=_direction_phrase(direction),
    )
    return [
        SystemMessage(content=system_message_text(instruction, language)),
        HumanMessage(content=user),
    ]


def system_message_text(instruction: str, lang: Language) -> str:
    """``prompts/system.md``: role, task instruction (at most 2,000 characters), how to work.

    The system message of the mutation prompt, the first-program prompt and every call that
    reads the context c_t (`evoduet_graph.prompts.descriptor.system_text`).
    """
    return render(
        "system",
        instruction=instruction[:2000].strip() or "(no task description was given)",
        language_name=lang.display,
    ).rstrip("\n")


def _edit_scope(code: str) -> str:
    """The EVOLVE-BLOCK rule with the program's own marker lines, or ``""`` without markers."""
    markers = evolve_marker_lines(code)
    if markers is None:
        return ""
    return _EDIT_SCOPE.format(start=markers[0], end=markers[1])


def _output_format(diff_based: bool, lang: Language, parent_code: str, *, block: bool) -> str:
    if diff_based:
        return load_prompt("format_diff").strip()
    one_block = block and len(evolve_regions(parent_code)) == 1
    markers = evolve_marker_lines(parent_code) if one_block else None
    if markers is not None:
        return render(
            "format_rewrite_block",
            drop_empty=True,
            fence=lang.fence,
            language_name=lang.display,
            start=markers[0],
            end=markers[1],
            import_rule=_PYTHON_BLOCK_IMPORT_RULE if lang.is_python else "",
            example=(
                load_prompt("format_rewrite_block_example_python").strip() if lang.is_python else ""
            ),
        ).strip()
    return render(
        "format_rewrite",
        drop_empty=True,
        fence=lang.fence,
        language_name=lang.display,
        import_rule=_PYTHON_IMPORT_RULE if lang.is_python else "",
        example=(load_prompt("format_rewrite_example_python").strip() if lang.is_python else ""),
    ).strip()
