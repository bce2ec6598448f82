"""Turn an LLM response into a candidate program: SEARCH/REPLACE diffs or full rewrites.

The response formats are OpenEvolve's (``openevolve/utils/code_utils.py``): a diff is one or more
blocks ::

    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

and a full rewrite is a fenced code block tagged with the task's language (```` ```python ````,
```` ```rust ````, ...; `evoduet_graph.tasks.languages`). This module is stricter than
OpenEvolve where silence would hide a broken candidate, and more tolerant where small models
routinely slip:

* **Parsing** (`parse_diff_blocks`) accepts 5-9 marker characters, CRLF line ends, indented
  marker lines, blocks inside code fences, fence lines inside a SEARCH or REPLACE part, and
  ``<think>…</think>`` reasoning before the answer (reasoning is removed first). Malformed blocks
  (a second ``=======``, a missing divider, a block cut off by the token limit) are reported, never
  applied: a stray divider absorbed into REPLACE text would be inserted as code.
* **Applying** (`apply_diff`) tries, per block and in order: exact line match; match ignoring
  trailing whitespace; match under one uniform indentation shift (the REPLACE text is re-indented
  by the same shift); the same while also ignoring blank lines. OpenEvolve stops after the second
  tier and silently skips blocks that do not match; here every failure carries a reason with the
  closest lines of the program, so the next prompt can show the model what it got wrong.
* **EVOLVE-BLOCK restriction.** When the parent has ``# EVOLVE-BLOCK-START`` /
  ``# EVOLVE-BLOCK-END`` regions and the restriction is on, a block may only edit lines inside a
  region (a SEARCH may include the marker lines as anchors if the REPLACE keeps them); a block
  that would alter a marker or any code outside the regions fails. OpenEvolve instead reverts such
  edits after the fact (``enforce_evolve_blocks``).
* **Ambiguity.** A SEARCH that matches several places is applied at the first match that lies
  inside an evolve region; with no match inside a region (and no restriction), at the first match.
* **Partial diffs are rejected.** `candidate_from_response` returns no code when any block of a
  response fails, with all the reasons; a program with half of a coordinated edit applied usually
  fails or, worse, scores as a misleading data point.
* **Rewrite splicing** (`extract_rewrite`): see its docstring.
* **Languages.** Everything here is line-based and works for any language; the Python-only
  steps (import hoisting of a rewrite, the compile check that lets a cut-off code block through)
  run only for Python. For other languages a cut-off block is rejected and imports the model
  adds outside the evolve regions are dropped with the rest of the fixed code.

All line numbers in messages for the model are 1-based; all line ranges returned by functions are
0-based, half-open.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from evoduet_graph.reply_text import clean_reply, fenced_blocks
from evoduet_graph.tasks.languages import language_by_name

__all__ = [
    "ApplyResult",
    "CandidateCode",
    "DiffBlock",
    "ParseOutcome",
    "UNCHANGED_REASONS",
    "apply_diff",
    "candidate_from_response",
    "code_diff_summary",
    "evolve_marker_lines",
    "evolve_regions",
    "extract_rewrite",
    "has_evolve_blocks",
    "parse_diff_blocks",
]

_SEARCH_RE = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*$")
_DIVIDER_RE = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_REPLACE_RE = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE[ \t]*$")
_FENCE_LINE_RE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*[\w+#.-]*[ \t]*$")
# A marker is a whole line: optional indentation and comment syntax (#, //, --, /*, <!--, %, ;),
# then the token. This accepts any language's comment style, as OpenEvolve does.
_EVOLVE_MARKER_RE = re.compile(r"^[^\w\n]*EVOLVE-BLOCK-(START|END)\b")

_MAX_SHOWN_LINES = 8
_MAX_SHOWN_LINE_CHARS = 120
_DIFF_LINE_CHARS = 160
_MAX_COMPARED_LINE_CHARS = 200
_CLOSEST_CANDIDATES = 12


# --------------------------------------------------------------------------------------------
# Data types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffBlock:
    r"""One SEARCH/REPLACE block.

    Attributes:
        search: Lines to find, joined with ``\n``, without a trailing newline; leading and
            trailing blank lines removed.
        replace: Lines that replace them, same normalisation; ``""`` deletes the matched lines.
    """

    search: str
    replace: str


@dataclass(frozen=True)
class ApplyResult:
    """What `apply_diff` did.

    Attributes:
        code: The parent with every applicable block applied, in order (blocks that failed are
            skipped, so this may be a *partial* edit; `candidate_from_response` rejects those).
        applied: Number of blocks applied.
        failed: One reason per failed or malformed block, each starting with ``block <k>:`` where
            k is the block's 1-based position in the response.
        changed: Whether ``code`` differs from the parent.
    """

    code: str
    applied: int
    failed: list[str] = field(default_factory=list)
    changed: bool = False


@dataclass(frozen=True)
class CandidateCode:
    """The candidate program extracted from one LLM response.

    Attributes:
        code: The full candidate program, or ``None`` when the response was rejected.
        kind: ``"diff"`` (SEARCH/REPLACE blocks applied), ``"rewrite"`` (a full program from a
            code block) or ``"none"`` (nothing usable).
        error: Why the response was rejected (shown to the model in the next prompt), else
            ``None``.
    """

    code: str | None
    kind: Literal["diff", "rewrite", "none"]
    error: str | None = None


ParseOutcome = CandidateCode
"""Alias of `CandidateCode` (the outcome of parsing a response)."""


@dataclass(frozen=True)
class _Match:
    start: int  # first replaced line (0-based)
    end: int  # one past the last replaced line
    replacement: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Response cleaning and parsing
# --------------------------------------------------------------------------------------------


def _trim_section(lines: list[str]) -> list[str]:
    """Strip a fence line at either end and leading/trailing blank lines of a block part."""
    lines = list(lines)
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and _FENCE_LINE_RE.match(lines[0]):
        lines.pop(0)
    if lines and _FENCE_LINE_RE.match(lines[-1]):
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _parse(text: str) -> tuple[list[tuple[int, DiffBlock]], list[tuple[int, str]], int]:
    """Parse blocks from an already cleaned response.

    Returns:
        ``(blocks, problems, total)``: the well-formed blocks with their 1-based position,
        ``(position, message)`` per malformed block, and the number of blocks started.
    """
    blocks: list[tuple[int, DiffBlock]] = []
    problems: list[tuple[int, str]] = []
    state: Literal["out", "search", "replace", "skip"] = "out"
    search: list[str] = []
    replace: list[str] = []
    number = 0

    def problem(message: str) -> None:
        problems.append((number, f"block {number}: {message}"))

    for line in text.split("\n"):
        if _SEARCH_RE.match(line):
            if state in ("search", "replace"):
                problem("a new '<<<<<<< SEARCH' started before '>>>>>>> REPLACE' closed this block")
            number += 1
            state, search, replace = "search", [], []
        elif state in ("out", "skip"):  # outside a block, or skipping a malformed one's rest
            if state == "skip" and _REPLACE_RE.match(line):
                state = "out"
        elif _DIVIDER_RE.match(line):
            if state == "search":
                state = "replace"
            else:
                problem("it has more than one '=======' divider")
                state = "skip"
        elif _REPLACE_RE.match(line):
            if state == "search":
                problem("the '=======' divider is missing")
            else:
                found = DiffBlock(
                    "\n".join(_trim_section(search)), "\n".join(_trim_section(replace))
                )
                blocks.append((number, found))
            state = "out"
        else:
            (search if state == "search" else replace).append(line)
    if state in ("search", "replace"):
        problem("it is not closed by '>>>>>>> REPLACE' (was the answer cut off?)")
    return blocks, problems, number


def parse_diff_blocks(text: str) -> list[DiffBlock]:
    """Extract the well-formed SEARCH/REPLACE blocks of an LLM response, in order.

    Tolerates 5-9 ``<``/``=``/``>`` marker characters, CRLF, indented markers, blocks inside code
    fences (and fence lines just inside a SEARCH or REPLACE part), and ``<think>`` reasoning.
    Malformed blocks are skipped; `apply_diff` reports them.

    Args:
        text: The raw response.

    Returns:
        The blocks in response order (possibly empty).
    """
    blocks, _, _ = _parse(clean_reply(text))
    return [block for _, block in blocks]


# --------------------------------------------------------------------------------------------
# Evolve regions
# --------------------------------------------------------------------------------------------


def _evolve_marker(line: str) -> str | None:
    match = _EVOLVE_MARKER_RE.match(line)
    return match.group(1) if match else None


def _regions_of_lines(lines: list[str]) -> list[tuple[int, int]]:
    regions: list[tuple[int, int]] = []
    open_at: int | None = None
    for i, line in enumerate(lines):
        marker = _evolve_marker(line)
        if marker == "START":
            open_at = i  # a second START re-opens: the earlier one is treated as outside code
        elif marker == "END" and open_at is not None:
            regions.append((open_at + 1, i))
            open_at = None
    return regions


def evolve_regions(code: str) -> list[tuple[int, int]]:
    r"""Line ranges of the editable regions between EVOLVE-BLOCK markers.

    A marker is a line whose first word is ``EVOLVE-BLOCK-START`` or ``EVOLVE-BLOCK-END``,
    after indentation and comment syntax of any language (``#``, ``//``, ``--``, ``/*``, ...), as
    in OpenEvolve; text after the token is allowed. An ``END`` without an open
    ``START`` and a ``START`` never closed are ignored; a second ``START`` before an ``END``
    re-opens the region at the later marker.

    Args:
        code: Program source (lines split on ``\n``).

    Returns:
        ``[(first, stop), ...]``: 0-based, half-open ranges of the *content* lines, i.e.
        ``code.split("\n")[first:stop]``; the START marker is line ``first - 1`` and the END
        marker line ``stop``.
    """
    return _regions_of_lines(code.split("\n"))


def evolve_marker_lines(code: str) -> tuple[str, str] | None:
    """The first region's START and END marker lines as written (stripped).

    The first region's START and END marker lines as written (stripped), e.g.
    ``("// EVOLVE-BLOCK-START", "// EVOLVE-BLOCK-END")``; None without a region.
    """
    lines = code.split("\n")
    regions = _regions_of_lines(lines)
    if not regions:
        return None
    first, stop = regions[0]
    return lines[first - 1].strip(), lines[stop].strip()


def has_evolve_blocks(code: str) -> bool:
    """Whether ``code`` has at least one well-formed EVOLVE-BLOCK region."""
    return bool(evolve_regions(code))


def _outside_lines(lines: list[str], regions: list[tuple[int, int]]) -> list[str]:
    """The fixed part of a program: every line not inside a region (markers included)."""
    out: list[str] = []
    pos = 0
    for first, stop in regions:
        out.extend(lines[pos:first])
        out.append("\x00")  # region boundary, so content cannot migrate across regions
        pos = stop
    out.extend(lines[pos:])
    return out


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------


def _indent_shift(window: list[str], search: list[str]) -> tuple[str, int] | None:
    """The uniform indentation shift mapping ``search`` onto ``window``, if there is one.

    Returns:
        ``(prefix, sign)``: sign 1 means each program line is ``prefix + search line``; sign -1
        means each search line is ``prefix + program line``; ``("", 0)`` means equal up to
        trailing whitespace. ``None`` when the lines differ otherwise or shift unevenly.
    """
    shift: tuple[str, int] | None = None
    for raw_p, raw_s in zip(window, search, strict=True):
        p, s = raw_p.rstrip(), raw_s.rstrip()
        if not p and not s:
            continue
        if not p or not s:
            return None
        if p == s:
            current: tuple[str, int] = ("", 0)
        elif p.endswith(s) and not p[: len(p) - len(s)].strip():
            current = (p[: len(p) - len(s)], 1)
        elif s.endswith(p) and not s[: len(s) - len(p)].strip():
            current = (s[: len(s) - len(p)], -1)
        else:
            return None
        if shift is None:
            shift = current
        elif shift != current:
            return None
    return shift


def _reindent(lines: list[str], prefix: str, sign: int) -> tuple[str, ...]:
    if sign == 0 or not prefix:
        return tuple(lines)
    out: list[str] = []
    for line in lines:
        if not line.strip():
            out.append(line.rstrip())
        elif sign > 0:
            out.append(prefix + line)
        elif line.startswith(prefix):
            out.append(line[len(prefix) :])
        else:
            out.append(line.lstrip())
    return tuple(out)


def _match_tiers(lines: list[str], search: list[str], replace: list[str]) -> Iterator[list[_Match]]:
    """Matches of ``search`` in ``lines``, one list per tier, strictest tier first (lazily).

    Tiers: exact; equal after ``rstrip`` (trailing whitespace); one uniform indentation shift
    (the replacement is re-indented by it); the same while ignoring blank lines on both sides.
    """
    n = len(search)
    rep = tuple(replace)
    starts = range(len(lines) - n + 1)
    yield [_Match(i, i + n, rep) for i in starts if lines[i : i + n] == search]

    stripped_search = [s.rstrip() for s in search]
    stripped_lines = [line.rstrip() for line in lines]
    yield [_Match(i, i + n, rep) for i in starts if stripped_lines[i : i + n] == stripped_search]

    indented: list[_Match] = []
    for i in starts:
        shift = _indent_shift(lines[i : i + n], search)
        if shift is not None:
            indented.append(_Match(i, i + n, _reindent(replace, *shift)))
    yield indented

    search_nb = [s for s in search if s.strip()]
    line_nb = [i for i, line in enumerate(lines) if line.strip()]
    m = len(search_nb)
    blank: list[_Match] = []
    for k in range(len(line_nb) - m + 1 if m else 0):
        idx = line_nb[k : k + m]
        shift = _indent_shift([lines[j] for j in idx], search_nb)
        if shift is not None:
            blank.append(_Match(idx[0], idx[-1] + 1, _reindent(replace, *shift)))
    yield blank


def _inside(match: _Match, regions: list[tuple[int, int]]) -> bool:
    # The span may include the region's marker lines (first - 1 and stop) as anchors.
    return any(first - 1 <= match.start and match.end <= stop + 1 for first, stop in regions)


def _clip(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _closest_lines(
    lines: list[str], search: list[str], regions: list[tuple[int, int]] | None
) -> str:
    """Describe the program lines most similar to ``search`` (for the failure reason).

    Two stages keep this linear in the program size: every window is ranked by how well its
    lines align with the first and last non-blank SEARCH lines, then the best few windows are
    compared in full (`difflib.SequenceMatcher`). Ties go to the earliest window.
    """
    target = [line.strip()[:_MAX_COMPARED_LINE_CHARS] for line in search]
    program = [line.strip()[:_MAX_COMPARED_LINE_CHARS] for line in lines]
    n = len(target)
    anchors = [k for k, line in enumerate(target) if line]
    if not anchors:
        return "no similar lines in the program"
    first_k, last_k = anchors[0], anchors[-1]
    spans = regions if regions else [(0, len(lines))]
    starts = [i for first, stop in spans for i in range(first, max(first + 1, stop - n + 1))]
    anchor_ratio: dict[tuple[int, int], float] = {}

    def anchor(k: int, j: int) -> float:
        if j >= len(program):
            return 0.0
        if (k, j) not in anchor_ratio:
            anchor_ratio[(k, j)] = _ratio(target[k], program[j])
        return anchor_ratio[(k, j)]

    ranked = sorted(
        starts, key=lambda i: (-(anchor(first_k, i + first_k) + anchor(last_k, i + last_k)), i)
    )
    best: tuple[float, int] | None = None
    joined = "\n".join(target)
    for i in sorted(ranked[:_CLOSEST_CANDIDATES]):
        ratio = _ratio(joined, "\n".join(program[i : i + n]))
        if best is None or ratio > best[0]:
            best = (ratio, i)
    if best is None or best[0] < 0.3:
        return "no similar lines in the program"
    ratio, i = best
    shown = lines[i : i + min(n, _MAX_SHOWN_LINES)]
    body = "\n".join(_clip(line, _MAX_SHOWN_LINE_CHARS) for line in shown)
    more = "\n(...)" if n > _MAX_SHOWN_LINES else ""
    return (
        f"the closest program lines are {i + 1}-{i + len(shown)} "
        f"({ratio:.0%} similar):\n{body}{more}"
    )


def _find(
    lines: list[str],
    search: list[str],
    replace: list[str],
    regions: list[tuple[int, int]],
    restricted: bool,
) -> tuple[_Match | None, _Match | None]:
    """``(match to apply, a match outside the evolve blocks)`` of the strictest tier."""
    outside_only: _Match | None = None
    for matches in _match_tiers(lines, search, replace):
        if not matches:
            continue
        inside = [m for m in matches if regions and _inside(m, regions)]
        if restricted:
            if inside:
                return inside[0], None
            outside_only = outside_only or matches[0]
            continue
        return (inside[0] if inside else matches[0]), None
    return None, outside_only


def _retab(lines: list[str], width: int, to_tabs: bool) -> list[str]:
    """Leading tabs as ``width`` spaces each (or groups of ``width`` leading spaces as tabs)."""
    out = []
    for line in lines:
        body = line.lstrip(" \t")
        lead = line[: len(line) - len(body)]
        if to_tabs:
            spaces = lead.replace("\t", " " * width)
            lead = "\t" * (len(spaces) // width) + " " * (len(spaces) % width)
        else:
            lead = lead.replace("\t", " " * width)
        out.append(lead + body)
    return out


def _find_retabbed(
    lines: list[str],
    search: list[str],
    replace: list[str],
    regions: list[tuple[int, int]],
    restricted: bool,
) -> tuple[_Match | None, _Match | None, str]:
    """Match a SEARCH text that differs from the program only in tabs vs spaces.

    The SEARCH and REPLACE lines are re-indented to the program's style (tabs as 4, 8 or 2
    spaces, or the reverse) and searched again. Applied when exactly one outcome results;
    otherwise the third value says why not (empty when indentation is not the issue).
    """

    def tabbed(text_lines: list[str]) -> bool:
        return any("\t" in ln[: len(ln) - len(ln.lstrip(" \t"))] for ln in text_lines)

    search_tabs, program_tabs = tabbed(search), tabbed(lines)
    if search_tabs == program_tabs:
        return None, None, ""
    to_tabs = program_tabs  # the program is tab-indented and the SEARCH text is not
    found: dict[tuple[int, int, tuple[str, ...]], list[int]] = {}
    outside: _Match | None = None
    for width in (4, 8, 2):
        match, elsewhere = _find(
            lines,
            _retab(search, width, to_tabs),
            _retab(replace, width, to_tabs),
            regions,
            restricted,
        )
        if match is not None:
            found.setdefault((match.start, match.end, match.replacement), []).append(width)
        outside = outside or elsewhere
    styles = ("the program is indented with tabs, the SEARCH text with spaces" if to_tabs
              else "the SEARCH text is indented with tabs, the program with spaces")  # fmt: skip
    if len(found) == 1:
        (start, end, rep), _ = next(iter(found.items()))
        return _Match(start, end, rep), None, ""
    if len(found) > 1:
        widths = " or ".join(f"{w[0]}" for w in found.values())
        return (
            None,
            None,
            (
                f"{styles}, and the tab width is ambiguous (as {widths} spaces the SEARCH text "
                "matches different lines); repeat the program's lines exactly, with its indentation"
            ),
        )
    if outside is not None:
        return None, outside, ""
    return (
        None,
        None,
        (
            f"the SEARCH text was not found in the program; note: {styles} (tabs were also tried "
            "as 4, 8 and 2 spaces); repeat the program's lines exactly, with its indentation"
        ),
    )


def _apply_block(
    lines: list[str], block: DiffBlock, number: int, restrict: bool
) -> tuple[list[str] | None, str | None]:
    """Apply one block to ``lines``; returns ``(new_lines, None)`` or ``(None, reason)``."""
    search = block.search.split("\n") if block.search else []
    if not any(s.strip() for s in search):
        return None, f"block {number}: the SEARCH part is empty"
    replace = block.replace.split("\n") if block.replace else []
    regions = _regions_of_lines(lines)
    restricted = restrict and bool(regions)

    chosen, outside_only = _find(lines, search, replace, regions, restricted)
    tab_note = ""
    if chosen is None and outside_only is None:
        chosen, outside_only, tab_note = _find_retabbed(lines, search, replace, regions, restricted)

    if chosen is None:
        if tab_note.startswith("the SEARCH text was not found"):
            closest = _closest_lines(lines, search, regions if restricted else None)
            return None, f"block {number}: {tab_note}; {closest}"
        if tab_note:
            return None, f"block {number}: {tab_note}"
        if outside_only is not None:
            return None, (
                f"block {number}: the SEARCH text only matches lines "
                f"{outside_only.start + 1}-{outside_only.end} outside the EVOLVE-BLOCK markers; "
                "that code is fixed and must not be edited"
            )
        return None, (
            f"block {number}: the SEARCH text was not found in the program; "
            + _closest_lines(lines, search, regions if restricted else None)
        )

    new_lines = lines[: chosen.start] + list(chosen.replacement) + lines[chosen.end :]
    if restricted:
        new_regions = _regions_of_lines(new_lines)
        if len(new_regions) != len(regions) or _outside_lines(
            new_lines, new_regions
        ) != _outside_lines(lines, regions):
            return None, (
                f"block {number}: the edit would change an EVOLVE-BLOCK marker or code outside "
                "the evolve blocks, which is fixed"
            )
    return new_lines, None


def apply_diff(parent: str, text: str, *, restrict_to_evolve_blocks: bool) -> ApplyResult:
    """Apply the SEARCH/REPLACE blocks of a response to ``parent``, in order.

    Each block is searched in the code produced by the blocks before it, with the tiers exact →
    trailing whitespace → uniform indentation shift (REPLACE re-indented by the same shift) →
    also ignoring blank lines. Several matches: the first one inside an evolve region, else the
    first. With ``restrict_to_evolve_blocks`` and a parent that has regions, a block fails when
    its SEARCH matches only outside the regions or when the edit would alter a marker or the
    code outside them; a parent without regions is editable everywhere. Failed blocks are
    skipped and the others still applied (OpenEvolve also skips them, silently).

    Args:
        parent: The program to edit.
        text: The raw LLM response.
        restrict_to_evolve_blocks: Confine edits to EVOLVE-BLOCK regions.

    Returns:
        An `ApplyResult`; ``failed`` also lists malformed blocks. A response without any block
        gives ``ApplyResult(parent, 0, [], False)``.
    """
    blocks, problems, _ = _parse(clean_reply(text))
    failures: dict[int, str] = dict(problems)
    lines = parent.split("\n")
    applied = 0
    for number, block in blocks:
        new_lines, reason = _apply_block(lines, block, number, restrict_to_evolve_blocks)
        if new_lines is None:
            failures[number] = reason or f"block {number}: failed"
            continue
        lines = new_lines
        applied += 1
    code = "\n".join(lines)
    return ApplyResult(
        code=code,
        applied=applied,
        failed=[failures[k] for k in sorted(failures)],
        changed=code != parent,
    )


# --------------------------------------------------------------------------------------------
# Full rewrites
# --------------------------------------------------------------------------------------------


def _compiles(code: str) -> bool:
    try:
        compile(code, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _pick_program(text: str, language: str = "python") -> tuple[str | None, str | None]:
    """The longest fenced block tagged with the language (else the longest untagged one)."""
    lang_info = language_by_name(language)
    tags = lang_info.fence_tags
    blocks = [
        block
        for block in fenced_blocks(text)
        if (block.info in tags or block.info == "")
        and not any(_SEARCH_RE.match(line) or _REPLACE_RE.match(line) for line in block.lines)
    ]
    if not blocks:
        return None, None
    tagged = [b for b in blocks if b.info in tags]
    pool = tagged or blocks
    best = max(pool, key=lambda b: len(b.body))  # first of equal length
    done = best.closed
    code = "\n".join(_trim_blank(list(best.lines)))
    if not code.strip():
        return None, "the code block is empty"
    if not done and not (lang_info.is_python and _compiles(code)):
        return None, "the code block is not closed and its code is incomplete (answer cut off?)"
    return code, None


def _trim_blank(lines: list[str]) -> list[str]:
    start, stop = 0, len(lines)
    while start < stop and not lines[start].strip():
        start += 1
    while stop > start and not lines[stop - 1].strip():
        stop -= 1
    return lines[start:stop]


def _splice(
    parent_lines: list[str], regions: list[tuple[int, int]], contents: list[list[str]]
) -> list[str]:
    out = list(parent_lines)
    for (first, stop), content in sorted(
        zip(regions, contents, strict=True), key=lambda rc: rc[0][0], reverse=True
    ):
        out[first:stop] = content
    return out


def _strip_fixed_code(
    code_lines: list[str], prefix: list[str], suffix: list[str]
) -> list[str] | None:
    """The lines between a known prefix and suffix, else ``None``.

    If ``code_lines`` starts with ``prefix`` and ends with ``suffix`` (comparing non-blank
    lines without trailing whitespace), return the lines in between, else ``None``.
    """

    def norm(lines: list[str]) -> list[str]:
        return [line.rstrip() for line in lines if line.strip()]

    want_pre, want_suf = norm(prefix), norm(suffix)
    start = 0
    seen = 0
    while seen < len(want_pre):
        if start >= len(code_lines):
            return None
        line = code_lines[start].rstrip()
        start += 1
        if not line:
            continue
        if line != want_pre[seen]:
            return None
        seen += 1
    stop = len(code_lines)
    seen = 0
    while seen < len(want_suf):
        if stop <= start:
            return None
        line = code_lines[stop - 1].rstrip()
        stop -= 1
        if not line:
            continue
        if line != want_suf[len(want_suf) - 1 - seen]:
            return None
        seen += 1
    return _trim_blank(code_lines[start:stop])


def _shares_fixed_code(code_lines: list[str], outside: list[str]) -> bool:
    """Whether a marker-less rewrite reproduces much of the parent's fixed (outside) code.

    Distinctive outside lines are non-marker lines of at least 8 non-space characters; the
    rewrite "reproduces" the fixed code when it contains half of them or more (one is enough
    when there is only one).
    """
    distinctive = {
        line.strip() for line in outside if len(line.strip()) >= 8 and _evolve_marker(line) is None
    }
    if not distinctive:
        return False
    present = len(distinctive & {line.strip() for line in code_lines})
    return present * 2 >= len(distinctive)


_TOP_LEVEL_IMPORT = re.compile(r"^(import\s+\w|from\s+[\w.]+\s+import\s)")


def _added_imports(lines: list[str], parent_outside: set[str]) -> list[str]:
    """The imports a rewrite adds to the parent's fixed code.

    Top-level ``import`` / ``from ... import`` lines of a rewrite that the parent's fixed
    code does not have (``from __future__`` excluded: it must stay first in the file).
    """
    return [
        line
        for line in lines
        if _TOP_LEVEL_IMPORT.match(line)
        and line.strip() not in parent_outside
        and not line.startswith("from __future__")
    ]


def _hoist_imports(imports: list[str], content: list[str]) -> list[str]:
    """``content`` with ``imports`` added at its top.

    ``content`` (an EVOLVE-BLOCK's lines) with ``imports`` added at its top, indented like
    its first code line, skipping those it already has.

    A full rewrite often adds the import it needs next to the parent's own imports, outside the
    editable region; the region is the only part a rewrite may change (the fixed code is kept
    verbatim), so without this the import would be dropped and the child fail with a
    ``NameError``. OpenEvolve, which takes a rewrite whole, keeps such imports too.
    """
    have = {line.strip() for line in content}
    new = list(dict.fromkeys(line.strip() for line in imports if line.strip() not in have))
    if not new:
        return content
    first = next((line for line in content if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip())]
    return [indent + line for line in new] + content


def _bound_names(node: ast.stmt) -> set[str]:
    """Names a module-level ``def``, ``class`` or plain assignment binds (else empty)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    if targets and all(isinstance(t, ast.Name) for t in targets):
        return {t.id for t in targets if isinstance(t, ast.Name)}
    return set()


def _module_names(lines: list[str]) -> set[str] | None:
    """Names the module-level statements of ``lines`` bind; None when they do not parse."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    return {name for node in tree.body for name in _bound_names(node)}


def _added_definitions(outside: list[str], fixed: list[str], content: list[str]) -> list[str]:
    """New module-level definitions a Python rewrite wrote outside its EVOLVE-BLOCK.

    A full rewrite often defines the constant or helper function its new block code uses next
    to the parent's own constants, outside the editable region; only the region is taken
    (rule 1 of `extract_rewrite`), so without this the child fails with a ``NameError`` (seen
    on the embedded model). Returned (source lines, in order): each module-level
    ``def``, ``class`` or plain assignment of ``outside`` (the rewrite's lines outside the
    region) that binds only names neither the parent's fixed code (``fixed``) nor the new
    region (``content``) binds. A definition that would rebind a fixed name is not moved: the
    fixed code stays what the parent says. ``[]`` when either side does not parse.
    """
    taken = _module_names(fixed)
    inside = _module_names(content)
    if taken is None or inside is None:
        return []
    try:
        tree = ast.parse("\n".join(outside))
    except SyntaxError:
        return []
    out: list[str] = []
    for node in tree.body:
        names = _bound_names(node)
        if not names or names & (taken | inside):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        out.extend([*outside[first - 1 : node.end_lineno], ""])
    return out


def _adopt_definitions(
    code_lines: list[str],
    new_region: tuple[int, int],
    parent_lines: list[str],
    region: tuple[int, int],
    content: list[str],
) -> list[str]:
    """The one module-level region ``content`` with the rewrite's new outside definitions.

    `_added_definitions` of the rewrite's lines above the region go after the region's leading
    imports, those below it at its end, so each keeps its order relative to the region's code.
    A region inside a function or class (indented) is returned as it is.
    """
    first_code = next((line for line in content if line.strip()), "")
    if first_code[:1].isspace():
        return content
    fixed = [line for i, line in enumerate(parent_lines) if not region[0] <= i < region[1]]
    above = _added_definitions(code_lines[: new_region[0] - 1], fixed, content)
    below = _added_definitions(code_lines[new_region[1] + 1 :], fixed, content + above)
    if not above and not below:
        return content
    at = 0
    while at < len(content) and (not content[at].strip() or _TOP_LEVEL_IMPORT.match(content[at])):
        at += 1
    body = content[at:]
    while body and not body[-1].strip():
        body.pop()
    tail = content[at + len(body) :]
    return [*content[:at], *above, *body, *([""] if below else []), *below, *tail]


class _RewriteRejected(Exception):
    """A code block was found but cannot become a candidate; the message says why."""


def _whole_program(code: str, parent: str, *, allow_fragment: bool) -> str:
    """A rewrite taken as the whole program (no EVOLVE-BLOCK to restrict it to).

    Raises:
        _RewriteRejected: without ``allow_fragment``, the code has fewer than half the
            parent's non-blank lines (a fragment, not a complete program).
    """
    if not allow_fragment:
        have = sum(1 for line in code.split("\n") if line.strip())
        need = sum(1 for line in parent.split("\n") if line.strip())
        if have * 2 < need:
            raise _RewriteRejected(
                f"the code block has {have} non-blank lines, the program {need}: it looks "
                "like a fragment, not a complete program"
            )
    return code + "\n" if parent.endswith("\n") else code


def _extract_rewrite(
    text: str, parent: str, *, restrict: bool, allow_fragment: bool, language: str = "python"
) -> str | None:
    """Core of `extract_rewrite`.

    Returns:
        The candidate program, or ``None`` when the response has no candidate code block.

    Raises:
        _RewriteRejected: a code block was found but violates the rules.
    """
    code, error = _pick_program(text, language)
    if error is not None:
        raise _RewriteRejected(error)
    python = language_by_name(language).is_python
    if code is None:
        return None
    parent_lines = parent.split("\n")
    code_lines = code.split("\n")
    regions = _regions_of_lines(parent_lines)

    if not (restrict and regions):
        return _whole_program(code, parent, allow_fragment=allow_fragment)

    outside_parent = {
        line.strip()
        for i, line in enumerate(parent_lines)
        if not any(first <= i < stop for first, stop in regions)
    }
    new_regions = _regions_of_lines(code_lines)
    if new_regions:
        if len(new_regions) != len(regions):
            raise _RewriteRejected(
                f"the rewrite has {len(new_regions)} EVOLVE-BLOCK region(s), the program has "
                f"{len(regions)}; keep the markers exactly as they are"
            )
        contents = [code_lines[first:stop] for first, stop in new_regions]
        outside = [
            line
            for i, line in enumerate(code_lines)
            if not any(first <= i < stop for first, stop in new_regions)
        ]
        if python:
            contents[0] = _hoist_imports(_added_imports(outside, outside_parent), contents[0])
            if len(regions) == 1:
                contents[0] = _adopt_definitions(
                    code_lines, new_regions[0], parent_lines, regions[0], contents[0]
                )
        return "\n".join(_splice(parent_lines, regions, contents))
    if any(_evolve_marker(line) for line in code_lines):
        content = _content_after_lone_start(code_lines, parent_lines, regions)
        if content is None:
            content = _content_before_lone_end(code_lines, parent_lines, regions)
            if content is not None and python:  # an import written above the block
                content = _hoist_imports(_added_imports(code_lines, outside_parent), content)
        if content is None:
            raise _RewriteRejected("the rewrite's EVOLVE-BLOCK markers are unbalanced")
        return "\n".join(_splice(parent_lines, regions, [content]))

    if len(regions) == 1:
        first, stop = regions[0]
        added = _added_imports(code_lines, outside_parent) if python else []
        middle = _strip_fixed_code(
            [line for line in code_lines if line not in added],
            parent_lines[: first - 1],
            parent_lines[stop + 1 :],
        )
        if middle is not None:
            return "\n".join(_splice(parent_lines, regions, [_hoist_imports(added, middle)]))
        outside = parent_lines[: first - 1] + parent_lines[stop + 1 :]
        if allow_fragment and not _shares_fixed_code(code_lines, outside):
            return "\n".join(_splice(parent_lines, regions, [code_lines]))
    raise _RewriteRejected(
        "the rewrite dropped the EVOLVE-BLOCK markers and cannot be mapped back onto the "
        "program; keep the marker lines and the code outside them unchanged"
    )


def _content_after_lone_start(
    code_lines: list[str], parent_lines: list[str], regions: list[tuple[int, int]]
) -> list[str] | None:
    """Block content of a rewrite that kept the START marker but dropped the END marker.

    Small models often omit ``# EVOLVE-BLOCK-END``. With one parent region and exactly one
    START marker (and no END marker) in the rewrite, the content runs from after START up to
    the first line equal to the parent's first non-blank fixed line after its END marker, or to
    the end of the rewrite. Returns None when that rule does not apply.
    """
    starts = [i for i, line in enumerate(code_lines) if _evolve_marker(line) == "START"]
    ends = [i for i, line in enumerate(code_lines) if _evolve_marker(line) == "END"]
    if len(regions) != 1 or len(starts) != 1 or ends:
        return None
    after_end = parent_lines[regions[0][1] + 1 :]
    anchor = next((line.rstrip() for line in after_end if line.strip()), None)
    body = code_lines[starts[0] + 1 :]
    if anchor is not None:
        for i, line in enumerate(body):
            if line.rstrip() == anchor:
                body = body[:i]
                break
    while body and not body[-1].strip():
        body.pop()
    return body + [""] if body else None


def _content_before_lone_end(
    code_lines: list[str], parent_lines: list[str], regions: list[tuple[int, int]]
) -> list[str] | None:
    """Block content of a rewrite that kept the END marker but not the START marker.

    The mirror of `_content_after_lone_start`, seen when the model is asked for the block only
    and still closes it with ``# EVOLVE-BLOCK-END``. With one parent region and
    exactly one END marker (and no START marker), the content runs from after the last line
    equal to the parent's last non-blank fixed line before its START marker (or from the top
    of the rewrite) up to END. Returns None when that rule does not apply.
    """
    starts = [i for i, line in enumerate(code_lines) if _evolve_marker(line) == "START"]
    ends = [i for i, line in enumerate(code_lines) if _evolve_marker(line) == "END"]
    if len(regions) != 1 or len(ends) != 1 or starts:
        return None
    before_start = parent_lines[: regions[0][0] - 1]
    anchor = next((line.rstrip() for line in reversed(before_start) if line.strip()), None)
    body = code_lines[: ends[0]]
    if anchor is not None:
        for i in range(len(body) - 1, -1, -1):
            if body[i].rstrip() == anchor:
                body = body[i + 1 :]
                break
    while body and not body[0].strip():
        body.pop(0)
    while body and not body[-1].strip():
        body.pop()
    return body + [""] if body else None


def extract_rewrite(
    text: str, parent: str, *, restrict_to_evolve_blocks: bool, language: str = "python"
) -> str | None:
    """The full program of a rewrite response, spliced into the parent's evolve regions.

    The program is the longest fenced block tagged with ``language`` or one of its aliases
    (``python``/``py``/``python3``; ``rust``/``rs``; ...), else the longest untagged block;
    blocks holding SEARCH/REPLACE markers are not programs. A block cut off by the token limit
    (no closing fence) is used only if it is Python and compiles.

    Splicing rule, when ``restrict_to_evolve_blocks`` and the parent has EVOLVE-BLOCK regions
    (OpenEvolve's ``enforce_evolve_blocks`` keeps the fixed code the same way):

    1. The rewrite has markers: it must have as many regions as the parent; the content of each
       region replaces the parent's corresponding region. Any edit outside the regions is
       discarded (the parent's fixed code is kept verbatim). Python: imports the rewrite adds
       outside are moved to the top of the (first) region, and with one module-level region
       so are new ``def``/``class``/assignment statements of names the fixed code and the
       region do not bind (`_added_definitions`: above the region to its top, below it to its
       end), since the region's new code uses them.
    2. No markers, parent has exactly one region, and the rewrite starts with the parent's code
       before the START marker and ends with its code after the END marker (non-blank lines,
       trailing whitespace ignored): the lines in between become the region's content.
    3. No markers, parent has exactly one region, and the rewrite reproduces less than half of
       the parent's distinctive fixed lines (non-marker lines of 8+ characters): the whole
       rewrite is taken as the new region content (the model answered with the block only).
    4. Otherwise (markers unbalanced or count changed, several regions without markers, a full
       program whose fixed code was edited): ``None``.

    Without the restriction, or for a parent without regions, the code block is the program.

    Args:
        text: The raw LLM response.
        parent: The program the rewrite replaces.
        restrict_to_evolve_blocks: Apply the splicing rule above.
        language: the program's language (`evoduet_graph.tasks.languages`); imports are hoisted
            into the region only for Python.

    Returns:
        The candidate program (ends with a newline when the parent does), or ``None``.
    """
    try:
        return _extract_rewrite(
            clean_reply(text),
            parent,
            restrict=restrict_to_evolve_blocks,
            allow_fragment=True,
            language=language,
        )
    except _RewriteRejected:
        return None


# --------------------------------------------------------------------------------------------
# Candidate from a response
# --------------------------------------------------------------------------------------------


def _from_diff(parent: str, text: str, restrict: bool) -> CandidateCode | None:
    blocks, problems, total = _parse(text)
    if not blocks and not problems:
        return None
    result = apply_diff(parent, text, restrict_to_evolve_blocks=restrict)
    if result.failed:
        return CandidateCode(
            None,
            "diff",
            f"{len(result.failed)} of {total} diff block(s) failed, so the answer was rejected: "
            + "; ".join(result.failed),
        )
    if not result.changed:
        return CandidateCode(
            None, "diff", f"{UNCHANGED_REASONS[1]} (each REPLACE equals its SEARCH)"
        )
    return CandidateCode(result.code, "diff", None)


#: Rejection reasons that mean the answer left the parent as it was (`_from_rewrite`,
#: `_from_diff`): the generate node resamples such an answer like a near-duplicate.
UNCHANGED_REASONS = ("the rewrite is identical to the current program", "diff produced no change")

_DIFF_MARKED = re.compile(r"^[+-](?=[ \t]|$|[A-Za-z_#@])")
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")


def _odd_indent(line: str) -> bool:
    return (len(line) - len(line.lstrip(" "))) % 2 == 1


def _hunk_context(lines: list[str], marked: set[int]) -> set[int]:
    """Indices of the unmarked lines next to ``marked`` ones that kept a diff's context space.

    In a unified diff an unchanged line is written with one leading space, so beside the
    ``+``/``-`` lines a copied hunk has lines indented one column deeper than the code around
    them (an odd indent in 4-space code). Walking up and down from each marked line, every
    unmarked line with an odd indent is taken, up to the first line that has neither.
    """
    context: set[int] = set()
    for i in marked:
        for step in (-1, 1):
            j = i + step
            while 0 <= j < len(lines) and (j in marked or _odd_indent(lines[j])):
                if j not in marked:
                    context.add(j)
                j += step
    return context


def _without_diff_markers(code: str) -> str | None:
    """A Python rewrite that kept unified-diff markers, read as the diff it was written as.

    The mutation prompt shows the top programs, inspirations and recent changes as unified
    diffs against the parent (`evoduet_graph.prompts.generate`), and a small model sometimes
    copies that form into its full rewrite: lines starting with ``-`` (to remove) and ``+``
    (to add), often with the hunk's unchanged lines still carrying the diff's one leading
    space, and sometimes the hunk's ``@@ -a,b +c,d @@`` header. No Python statement starts with
    ``+``/``-``/``@@ -`` at column 0, so for a rewrite that does not compile and has such lines,
    this drops the ``-`` lines and the headers and the ``+`` prefix of the others; if that does
    not compile, it also takes the context space off the unmarked lines
    of the hunks (`_hunk_context`). Returns the first result that compiles, else ``None`` (the
    caller keeps the rewrite, and its compile error is reported as usual).
    """
    lines = code.split("\n")
    marked = {
        i for i, line in enumerate(lines) if _DIFF_MARKED.match(line) or _HUNK_HEADER.match(line)
    }
    if not marked:
        return None
    for context in (set(), _hunk_context(lines, marked)):
        kept = [
            line[1:] if i in context or (i in marked and line.startswith("+")) else line
            for i, line in enumerate(lines)
            if not (i in marked and line.startswith(("-", "@")))
        ]
        repaired = "\n".join(kept)
        if _compiles(repaired):
            return repaired
    return None


def _from_rewrite(
    parent: str, text: str, restrict: bool, allow_fragment: bool, language: str = "python"
) -> CandidateCode | None:
    try:
        code = _extract_rewrite(
            text, parent, restrict=restrict, allow_fragment=allow_fragment, language=language
        )
    except _RewriteRejected as exc:
        return CandidateCode(None, "rewrite", str(exc))
    if code is None:
        return None
    if language == "python" and not _compiles(code):
        code = _without_diff_markers(code) or code
    if code == parent or code.rstrip("\n") == parent.rstrip("\n"):
        return CandidateCode(None, "rewrite", UNCHANGED_REASONS[0])
    return CandidateCode(code, "rewrite", None)


def candidate_from_response(
    parent: str,
    response_text: str,
    *,
    diff_based: bool,
    restrict_to_evolve_blocks: bool,
    language: str = "python",
) -> CandidateCode:
    """Extract the candidate program of one generation response.

    Order: with ``diff_based``, SEARCH/REPLACE blocks first, then a full program in a code block
    (as a fallback, a code block must look complete: with the restriction and a parent with
    regions it must keep the markers or the parent's fixed code, rules 1-2 of
    `extract_rewrite`; otherwise it needs at least half the parent's non-blank lines, so a
    snippet of one changed function is not mistaken for the program). Without ``diff_based``,
    the rewrite first (all splicing rules), then diff blocks. A Python rewrite that does not
    compile because it kept unified-diff ``+``/``-`` markers is read as that diff
    (`_without_diff_markers`).

    Partial diffs are rejected: if any block fails or is malformed, the candidate has no code
    and ``error`` lists every failure, e.g. ``"1 of 3 diff block(s) failed, so the answer was
    rejected: block 2: the SEARCH text was not found ..."``.

    Args:
        parent: The parent program.
        response_text: The raw LLM response.
        diff_based: The prompt asked for diffs (else for a full rewrite).
        restrict_to_evolve_blocks: Confine edits to the parent's EVOLVE-BLOCK regions.
        language: the program's language: which code blocks count as the program, and
            whether the Python-only steps of `extract_rewrite` run.

    Returns:
        A `CandidateCode`; ``kind="none"`` with ``error="no SEARCH/REPLACE block or code block
        found"`` when the response holds neither. When both forms are present and fail, the error
        of the requested form is reported.
    """
    text = clean_reply(response_text)
    restrict = restrict_to_evolve_blocks
    order = ("diff", "rewrite") if diff_based else ("rewrite", "diff")
    first_failure: CandidateCode | None = None
    for form in order:
        outcome = (
            _from_diff(parent, text, restrict)
            if form == "diff"
            else _from_rewrite(
                parent, text, restrict, allow_fragment=not diff_based, language=language
            )
        )
        if outcome is None:
            continue
        if outcome.code is not None:
            return outcome
        first_failure = first_failure or outcome
    if first_failure is not None:
        if diff_based and first_failure.kind == "rewrite":
            return CandidateCode(
                None,
                "rewrite",
                "no SEARCH/REPLACE block found, and the code block is not a usable full "
                f"program: {first_failure.error}",
            )
        return first_failure
    return CandidateCode(None, "none", "no SEARCH/REPLACE block or code block found")


# --------------------------------------------------------------------------------------------
# Display
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)  # prompts show the same top programs iteration after iteration
def code_diff_summary(parent: str, child: str, max_lines: int = 40) -> str:
    """A compact unified diff from ``parent`` to ``child`` for prompts and reports.

    File headers are omitted, hunks keep 2 context lines, lines longer than 160 characters are
    clipped, and the output is cut after ``max_lines`` diff lines with a ``... (N more diff
    lines)`` note.

    Args:
        parent: Old program.
        child: New program.
        max_lines: Maximum diff lines shown (>= 1).

    Returns:
        The diff text, or ``"(no change)"`` when the programs have the same lines.
    """
    diff = list(difflib.unified_diff(parent.splitlines(), child.splitlines(), lineterm="", n=2))[2:]
    if not diff:
        return "(no change)"
    max_lines = max(1, max_lines)
    shown = [_clip(line, _DIFF_LINE_CHARS) for line in diff[:max_lines]]
    if len(diff) > max_lines:
        shown.append(f"... ({len(diff) - max_lines} more diff lines)")
    return "\n".join(shown)
