"""Property-based fuzzing of diff application.

Any model text either yields an exact, reviewable change or is rejected with a reason — never an
exception.

Strategies build model answers from the pieces models actually emit (SEARCH/REPLACE markers of
4-10 characters, code fences, ``<think>`` tags, EVOLVE-BLOCK markers, lines of the parent, CRLF
line ends, random text) as well as arbitrary unicode.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoduet_graph.candidates.diffs import (
    apply_diff,
    candidate_from_response,
    evolve_regions,
    parse_diff_blocks,
)

PARENT = """\
import numpy as np

N = 12


# EVOLVE-BLOCK-START
def make_points():
    radius = 0.6
    spread = np.pi
    angles = np.linspace(0.0, spread, N, endpoint=False)
    return np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)
# EVOLVE-BLOCK-END


def run():
    return make_points()
"""
PARENT_LINES = PARENT.split("\n")

#: ``EVODUET_FUZZ_EXAMPLES=5000 EVODUET_FUZZ_RANDOM=1`` for a longer, randomised search.
FUZZ = settings(
    max_examples=int(os.environ.get("EVODUET_FUZZ_EXAMPLES", "250")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=not os.environ.get("EVODUET_FUZZ_RANDOM"),
)

marker = st.sampled_from(["<", "=", ">"]).flatmap(
    lambda ch: st.integers(4, 10).map(lambda n: ch * n)
)
fragment = st.one_of(
    st.sampled_from(PARENT_LINES),
    marker.map(lambda m: f"{m} SEARCH" if m[0] == "<" else f"{m} REPLACE" if m[0] == ">" else m),
    st.sampled_from(
        [
            "```python",
            "```",
            "~~~",
            "<think>",
            "</think>",
            "<thinking>",
            "# EVOLVE-BLOCK-START",
            "# EVOLVE-BLOCK-END",
            "",
            "    ",
            "Here is my change:",
            "    radius = 1.0",
            "    return None",
            "def make_points(:",
            "\t",
            "<<<<<<< SEARCH",
            "=======",
            ">>>>>>> REPLACE",
        ]
    ),
    st.text(max_size=40),
)
model_text = st.tuples(st.lists(fragment, max_size=40), st.sampled_from(["\n", "\r\n"])).map(
    lambda parts: parts[1].join(parts[0])
)
any_text = st.one_of(model_text, st.text(max_size=400))


def _outside(code: str) -> list[str]:
    lines = code.split("\n")
    inside: set[int] = set()
    for first, stop in evolve_regions(code):
        inside.update(range(first, stop))
    return [line for i, line in enumerate(lines) if i not in inside]


@FUZZ
@given(text=any_text)
def test_parse_never_raises(text: str) -> None:
    blocks = parse_diff_blocks(text)
    assert all(isinstance(b.search, str) and isinstance(b.replace, str) for b in blocks)


@FUZZ
@given(text=any_text, restrict=st.booleans())
def test_apply_never_raises_and_reports_every_failure(text: str, restrict: bool) -> None:
    result = apply_diff(PARENT, text, restrict_to_evolve_blocks=restrict)
    assert isinstance(result.code, str)
    assert result.changed == (result.code != PARENT)
    assert all(reason.startswith("block ") for reason in result.failed)
    if result.applied == 0:
        assert result.code == PARENT


@FUZZ
@given(text=any_text, diff_based=st.booleans(), restrict=st.booleans())
def test_candidate_is_a_change_or_a_reason(text: str, diff_based: bool, restrict: bool) -> None:
    cand = candidate_from_response(
        PARENT, text, diff_based=diff_based, restrict_to_evolve_blocks=restrict
    )
    assert cand.kind in ("diff", "rewrite", "none")
    assert (cand.code is None) != (cand.error is None)  # exactly one of them
    if cand.code is None:
        assert cand.error.strip()
    else:
        assert cand.code.rstrip("\n") != PARENT.rstrip("\n")  # a real change
        if restrict:  # fixed code outside the EVOLVE-BLOCK never changes
            assert _outside(cand.code) == _outside(PARENT)


safe_line = st.text(
    alphabet=st.characters(
        blacklist_characters="<=>`~\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
        blacklist_categories=("Cs",),
    ),
    min_size=1,
    max_size=30,
).filter(lambda s: s.strip() and "EVOLVE-BLOCK" not in s and "think" not in s.lower())


@FUZZ
@given(
    start=st.integers(0, len(PARENT_LINES) - 1),
    length=st.integers(1, 4),
    replacement=st.lists(safe_line, min_size=0, max_size=4),
    prose=st.sampled_from(["", "Here is the change.\n", "<think>hmm</think>\n"]),
)
def test_a_valid_block_applies_exactly(
    start: int, length: int, replacement: list[str], prose: str
) -> None:
    stop = min(len(PARENT_LINES), start + length)
    search = PARENT_LINES[start:stop]
    if not search[0].strip() or not search[-1].strip():
        return  # blank edges are trimmed by the parser: not an exact-match case
    if PARENT.count("\n".join(search)) != 1:
        return  # ambiguous SEARCH text
    replacement = [line.rstrip() for line in replacement]
    if replacement and (not replacement[0].strip() or not replacement[-1].strip()):
        return
    text = (
        f"{prose}<<<<<<< SEARCH\n"
        + "\n".join(search)
        + "\n=======\n"
        + "\n".join(replacement)
        + "\n>>>>>>> REPLACE\n"
    )
    expected = "\n".join(PARENT_LINES[:start] + replacement + PARENT_LINES[stop:])
    cand = candidate_from_response(PARENT, text, diff_based=True, restrict_to_evolve_blocks=False)
    if expected == PARENT:
        assert cand.code is None and cand.error
    else:
        assert cand.error is None and cand.code == expected
