"""SEARCH/REPLACE parsing and application, rewrite splicing, candidate extraction."""

from __future__ import annotations

import numpy as np
import pytest

from evoduet_graph.candidates.diffs import (
    ApplyResult,
    CandidateCode,
    DiffBlock,
    apply_diff,
    candidate_from_response,
    code_diff_summary,
    evolve_regions,
    extract_rewrite,
    has_evolve_blocks,
    parse_diff_blocks,
)

PARENT = """\
import numpy as np

LIMIT = 10


# EVOLVE-BLOCK-START
def solve(n):
    total = 0
    for i in range(n):
        total += i

    return total
# EVOLVE-BLOCK-END


def run():
    total = 0
    return solve(LIMIT) + total
"""

PLAIN = """\
def f(x):
    y = x + 1
    return y
"""


def diff(search: str, replace: str, markers: tuple[int, int, int] = (7, 7, 7)) -> str:
    lt, eq, gt = markers
    return f"{'<' * lt} SEARCH\n{search}\n{'=' * eq}\n{replace}\n{'>' * gt} REPLACE\n"


# ------------------------------------------------------------------------------------------
# evolve regions
# ------------------------------------------------------------------------------------------


def test_evolve_regions_are_content_line_ranges() -> None:
    lines = PARENT.split("\n")
    [(first, stop)] = evolve_regions(PARENT)
    assert lines[first - 1] == "# EVOLVE-BLOCK-START"
    assert lines[stop] == "# EVOLVE-BLOCK-END"
    assert lines[first] == "def solve(n):"
    assert has_evolve_blocks(PARENT)
    assert not has_evolve_blocks(PLAIN)


def test_evolve_regions_other_comment_styles_and_stray_markers() -> None:
    code = "// EVOLVE-BLOCK-END\nint a;\n// EVOLVE-BLOCK-START\nint b;\n// EVOLVE-BLOCK-END\n"
    assert evolve_regions(code) == [(3, 4)]
    assert evolve_regions("# EVOLVE-BLOCK-START\nx = 1\n") == []  # never closed


# ------------------------------------------------------------------------------------------
# parsing
# ------------------------------------------------------------------------------------------


def test_parse_plain_block() -> None:
    assert parse_diff_blocks(diff("a = 1", "a = 2")) == [DiffBlock("a = 1", "a = 2")]


@pytest.mark.parametrize("markers", [(7, 7, 7), (5, 5, 5), (9, 9, 9), (7, 9, 5), (8, 6, 9)])
def test_parse_tolerates_marker_lengths(markers: tuple[int, int, int]) -> None:
    assert parse_diff_blocks(diff("a = 1", "a = 2", markers)) == [DiffBlock("a = 1", "a = 2")]


def test_parse_ignores_four_or_ten_marker_characters() -> None:
    assert parse_diff_blocks(diff("a = 1", "a = 2", (4, 7, 7))) == []
    assert parse_diff_blocks(diff("a = 1", "a = 2", (10, 7, 7))) == []


def test_parse_crlf_fences_think_and_prose() -> None:
    text = (
        "<think>I could write\n<<<<<<< SEARCH\nnope\n=======\nno\n>>>>>>> REPLACE\n</think>\n"
        "Here is the change:\n```python\n" + diff("a = 1", "a = 2") + "```\n"
        "And another one:\n```\n" + diff("b = 1", "b = 2") + "```\nDone."
    ).replace("\n", "\r\n")
    assert parse_diff_blocks(text) == [DiffBlock("a = 1", "a = 2"), DiffBlock("b = 1", "b = 2")]


def test_parse_orphan_closing_think_tag_drops_reasoning() -> None:
    text = "reasoning <<<<<<< SEARCH\n" + diff("x", "y") + "</think>\n" + diff("a", "b")
    assert parse_diff_blocks(text) == [DiffBlock("a", "b")]


def test_parse_strips_fence_lines_inside_parts() -> None:
    text = "<<<<<<< SEARCH\n```python\na = 1\n```\n=======\n```python\na = 2\n```\n>>>>>>> REPLACE"
    assert parse_diff_blocks(text) == [DiffBlock("a = 1", "a = 2")]


def test_parse_keeps_multiline_and_indented_text() -> None:
    text = diff("    for i in range(3):\n        pass", "    pass")
    assert parse_diff_blocks(text) == [
        DiffBlock("    for i in range(3):\n        pass", "    pass")
    ]


def test_parse_skips_malformed_blocks_and_apply_reports_them() -> None:
    text = (
        diff("a", "b")
        + "<<<<<<< SEARCH\nc\n=======\nd\n=======\ne\n>>>>>>> REPLACE\n"
        + "<<<<<<< SEARCH\nf\n=======\ng\n"
    )
    assert parse_diff_blocks(text) == [DiffBlock("a", "b")]
    result = apply_diff("a\n", text, restrict_to_evolve_blocks=False)
    assert result.applied == 1
    assert len(result.failed) == 2
    assert result.failed[0].startswith("block 2:") and "more than one" in result.failed[0]
    assert result.failed[1].startswith("block 3:") and "not closed" in result.failed[1]


# ------------------------------------------------------------------------------------------
# applying
# ------------------------------------------------------------------------------------------


def test_apply_exact() -> None:
    result = apply_diff(
        PLAIN, diff("    y = x + 1", "    y = x + 2"), restrict_to_evolve_blocks=True
    )
    assert result == ApplyResult(PLAIN.replace("x + 1", "x + 2"), 1, [], True)


def test_apply_ignores_trailing_whitespace() -> None:
    parent = "def f(x):   \n    y = x + 1  \n    return y\n"
    result = apply_diff(
        parent,
        diff("def f(x):\n    y = x + 1", "def f(x):\n    y = x + 3"),
        restrict_to_evolve_blocks=False,
    )
    assert result.failed == []
    assert result.code == "def f(x):\n    y = x + 3\n    return y\n"


def test_apply_reindents_replacement_under_indentation_shift() -> None:
    # The model dropped the function's indentation in SEARCH and REPLACE.
    text = diff("y = x + 1\nreturn y", "if x > 0:\n    y = x + 1\nreturn y")
    result = apply_diff(PLAIN, text, restrict_to_evolve_blocks=False)
    assert result.failed == []
    assert result.code == "def f(x):\n    if x > 0:\n        y = x + 1\n    return y\n"


def test_apply_dedents_replacement_when_search_is_over_indented() -> None:
    text = diff("        y = x + 1", "        y = x * 2")
    result = apply_diff(PLAIN, text, restrict_to_evolve_blocks=False)
    assert result.code == PLAIN.replace("x + 1", "x * 2")


def test_apply_tolerates_missing_blank_lines() -> None:
    text = diff("        total += i\n    return total", "        total += 2 * i\n    return total")
    result = apply_diff(PARENT, text, restrict_to_evolve_blocks=True)
    assert result.failed == []
    assert "total += 2 * i\n    return total\n# EVOLVE-BLOCK-END" in result.code


def test_apply_rejects_block_outside_evolve_region_when_restricted() -> None:
    text = diff("def run():\n    total = 0", "def run():\n    total = 1")
    restricted = apply_diff(PARENT, text, restrict_to_evolve_blocks=True)
    assert restricted.applied == 0 and not restricted.changed
    assert "outside the EVOLVE-BLOCK" in restricted.failed[0]
    unrestricted = apply_diff(PARENT, text, restrict_to_evolve_blocks=False)
    assert unrestricted.failed == [] and "    total = 1\n    return solve" in unrestricted.code


def test_apply_marker_line_as_anchor_is_allowed_but_removing_it_is_not() -> None:
    keep = diff("# EVOLVE-BLOCK-START\ndef solve(n):", "# EVOLVE-BLOCK-START\ndef solve(n, k=1):")
    result = apply_diff(PARENT, keep, restrict_to_evolve_blocks=True)
    assert result.failed == [] and "def solve(n, k=1):" in result.code
    drop = diff("# EVOLVE-BLOCK-START\ndef solve(n):", "def solve(n):")
    result = apply_diff(PARENT, drop, restrict_to_evolve_blocks=True)
    assert result.applied == 0 and "marker" in result.failed[0]


def test_apply_rejects_added_markers_when_restricted() -> None:
    text = diff("    total = 0", "    total = 0\n# EVOLVE-BLOCK-END\nx = 1\n# EVOLVE-BLOCK-START")
    result = apply_diff(PARENT, text, restrict_to_evolve_blocks=True)
    assert result.applied == 0 and result.failed


def test_apply_ambiguous_match_prefers_evolve_block() -> None:
    # "    total = 0" occurs inside the block (line 8) and outside it (line 17).
    text = diff("    total = 0", "    total = 5")
    for restrict in (True, False):
        result = apply_diff(PARENT, text, restrict_to_evolve_blocks=restrict)
        assert result.code.count("total = 5") == 1
        assert result.code.index("total = 5") < result.code.index("# EVOLVE-BLOCK-END")


def test_apply_restricted_falls_through_to_looser_match_inside_block() -> None:
    parent = "x = 1\n# EVOLVE-BLOCK-START\nif True:\n    x = 1\n# EVOLVE-BLOCK-END\n"
    result = apply_diff(parent, diff("x = 1", "x = 2"), restrict_to_evolve_blocks=True)
    assert result.code == "x = 1\n# EVOLVE-BLOCK-START\nif True:\n    x = 2\n# EVOLVE-BLOCK-END\n"


def test_apply_ambiguous_match_without_regions_uses_first() -> None:
    result = apply_diff("a = 1\na = 1\n", diff("a = 1", "a = 2"), restrict_to_evolve_blocks=True)
    assert result.code == "a = 2\na = 1\n"


def test_apply_missing_search_fails_with_reason_and_closest_lines() -> None:
    text = diff("    for j in range(n):\n        total += j", "    pass")
    result = apply_diff(PARENT, text, restrict_to_evolve_blocks=True)
    assert result.applied == 0 and not result.changed and result.code == PARENT
    [reason] = result.failed
    assert reason.startswith("block 1: the SEARCH text was not found")
    assert "for i in range(n):" in reason  # the closest program lines help the next attempt


def test_apply_empty_search_fails() -> None:
    result = apply_diff(PLAIN, diff("", "x = 1"), restrict_to_evolve_blocks=False)
    assert "empty" in result.failed[0]


def test_apply_multiple_blocks_in_order() -> None:
    text = diff("    y = x + 1", "    y = x + 1\n    z = y * 2") + diff(
        "    z = y * 2\n    return y", "    z = y * 2\n    return z"
    )
    result = apply_diff(PLAIN, text, restrict_to_evolve_blocks=False)
    assert result.applied == 2 and result.failed == []
    assert result.code == "def f(x):\n    y = x + 1\n    z = y * 2\n    return z\n"


def test_apply_partial_reports_failures_and_keeps_successes() -> None:
    text = diff("    y = x + 1", "    y = x + 2") + diff("nothing like this", "x")
    result = apply_diff(PLAIN, text, restrict_to_evolve_blocks=False)
    assert result.applied == 1 and result.changed
    assert [r.split(":")[0] for r in result.failed] == ["block 2"]


def test_apply_without_blocks_is_a_no_op() -> None:
    assert apply_diff(PLAIN, "no diff here", restrict_to_evolve_blocks=True) == ApplyResult(
        PLAIN, 0, [], False
    )


# ------------------------------------------------------------------------------------------
# rewrites
# ------------------------------------------------------------------------------------------


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is the program:\n```{lang}\n{code}```\n"


def test_rewrite_with_markers_splices_only_block_contents() -> None:
    rewrite = PARENT.replace("total += i", "total += i * i").replace("LIMIT = 10", "LIMIT = 99")
    code = extract_rewrite(fenced(rewrite), PARENT, restrict_to_evolve_blocks=True)
    assert code is not None
    assert "total += i * i" in code
    assert "LIMIT = 10" in code and "LIMIT = 99" not in code  # outside edits discarded
    assert code.endswith("return solve(LIMIT) + total\n")


def test_rewrite_without_restriction_is_taken_verbatim() -> None:
    rewrite = PARENT.replace("LIMIT = 10", "LIMIT = 99")
    assert extract_rewrite(fenced(rewrite), PARENT, restrict_to_evolve_blocks=False) == rewrite


def test_rewrite_without_markers_but_same_fixed_code_is_spliced() -> None:
    rewrite = PARENT.replace("# EVOLVE-BLOCK-START\n", "").replace("# EVOLVE-BLOCK-END\n", "")
    rewrite = rewrite.replace("total += i", "total -= i")
    code = extract_rewrite(fenced(rewrite), PARENT, restrict_to_evolve_blocks=True)
    assert code == PARENT.replace("total += i", "total -= i")


def test_rewrite_of_block_content_only_is_spliced() -> None:
    code = extract_rewrite(
        fenced("def solve(n):\n    return n * (n - 1) // 2\n"),
        PARENT,
        restrict_to_evolve_blocks=True,
    )
    assert code is not None
    assert (
        "# EVOLVE-BLOCK-START\ndef solve(n):\n    return n * (n - 1) // 2\n# EVOLVE-BLOCK-END"
        in code
    )
    assert code.startswith("import numpy as np\n") and code.endswith("+ total\n")


def test_rewrite_without_markers_that_edits_fixed_code_is_rejected() -> None:
    rewrite = PARENT.replace("# EVOLVE-BLOCK-START\n", "").replace("# EVOLVE-BLOCK-END\n", "")
    rewrite = rewrite.replace("LIMIT = 10", "LIMIT = 99")
    assert extract_rewrite(fenced(rewrite), PARENT, restrict_to_evolve_blocks=True) is None


def test_rewrite_with_wrong_number_of_regions_is_rejected() -> None:
    rewrite = PARENT + "# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n"
    assert extract_rewrite(fenced(rewrite), PARENT, restrict_to_evolve_blocks=True) is None


def test_rewrite_picks_longest_python_block_and_skips_diffs() -> None:
    text = (
        fenced("x = 1\n") + fenced(PLAIN) + fenced("y = 2\n" * 20, "text") + fenced(diff("a", "b"))
    )
    assert extract_rewrite(text, "z = 0\n", restrict_to_evolve_blocks=False) == PLAIN


def test_rewrite_unclosed_fence_accepted_only_if_it_compiles() -> None:
    assert (
        extract_rewrite("```python\n" + PLAIN, "z = 0\n", restrict_to_evolve_blocks=False) == PLAIN
    )
    cut = "```python\ndef f(x):\n    return (x +"
    assert extract_rewrite(cut, "z = 0\n", restrict_to_evolve_blocks=False) is None


# ------------------------------------------------------------------------------------------
# candidate_from_response
# ------------------------------------------------------------------------------------------


def test_candidate_from_diff() -> None:
    cand = candidate_from_response(
        PARENT,
        diff("        total += i", "        total += 3 * i"),
        diff_based=True,
        restrict_to_evolve_blocks=True,
    )
    assert cand == CandidateCode(PARENT.replace("total += i", "total += 3 * i"), "diff", None)


def test_candidate_garbage_is_none_with_error() -> None:
    cand = candidate_from_response(
        PARENT,
        "I think you should use a better algorithm.",
        diff_based=True,
        restrict_to_evolve_blocks=True,
    )
    assert cand == CandidateCode(None, "none", "no SEARCH/REPLACE block or code block found")
    assert (
        candidate_from_response(PARENT, "", diff_based=False, restrict_to_evolve_blocks=True).kind
        == "none"
    )


def test_candidate_partial_diff_is_rejected_with_all_reasons() -> None:
    text = (
        diff("        total += i", "        total += 2 * i")
        + diff("    missing_line()", "    other()")
        + diff("def run():\n    total = 0", "def run():\n    total = 1")
    )
    cand = candidate_from_response(PARENT, text, diff_based=True, restrict_to_evolve_blocks=True)
    assert cand.code is None and cand.kind == "diff"
    assert cand.error is not None
    assert cand.error.startswith("2 of 3 diff block(s) failed")
    assert "block 2: the SEARCH text was not found" in cand.error
    assert "block 3: the SEARCH text only matches" in cand.error


def test_candidate_diff_without_change() -> None:
    cand = candidate_from_response(
        PLAIN,
        diff("    y = x + 1", "    y = x + 1"),
        diff_based=True,
        restrict_to_evolve_blocks=False,
    )
    assert cand.code is None and cand.error is not None and "no change" in cand.error


def test_candidate_diff_mode_falls_back_to_full_rewrite() -> None:
    rewrite = PARENT.replace("total += i", "total += i + 1")
    cand = candidate_from_response(
        PARENT, fenced(rewrite), diff_based=True, restrict_to_evolve_blocks=True
    )
    assert cand == CandidateCode(rewrite, "rewrite", None)


def test_candidate_diff_mode_rejects_fragment_as_rewrite() -> None:
    cand = candidate_from_response(
        PARENT,
        fenced("def solve(n):\n    return 0\n"),
        diff_based=True,
        restrict_to_evolve_blocks=True,
    )
    assert cand.code is None and cand.error is not None
    assert cand.error.startswith("no SEARCH/REPLACE block found")


def test_candidate_rewrite_mode_prefers_rewrite_then_diff() -> None:
    cand = candidate_from_response(
        PLAIN, fenced("def f(x):\n    return x\n"), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand == CandidateCode("def f(x):\n    return x\n", "rewrite", None)
    cand = candidate_from_response(
        PLAIN,
        diff("    y = x + 1", "    y = x - 1"),
        diff_based=False,
        restrict_to_evolve_blocks=True,
    )
    assert cand.kind == "diff" and cand.code == PLAIN.replace("x + 1", "x - 1")


def test_candidate_identical_rewrite_is_rejected() -> None:
    cand = candidate_from_response(
        PLAIN, fenced(PLAIN), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code is None and cand.error == "the rewrite is identical to the current program"


# ------------------------------------------------------------------------------------------
# code_diff_summary
# ------------------------------------------------------------------------------------------


def test_code_diff_summary() -> None:
    assert code_diff_summary(PLAIN, PLAIN) == "(no change)"
    summary = code_diff_summary(PLAIN, PLAIN.replace("x + 1", "x + 2"))
    assert "-    y = x + 1" in summary and "+    y = x + 2" in summary
    assert not summary.startswith("---")
    big_a = "".join(f"a{i}\n" for i in range(100))
    big_b = "".join(f"b{i}\n" for i in range(100))
    lines = code_diff_summary(big_a, big_b, max_lines=10).split("\n")
    assert len(lines) == 11 and lines[-1].startswith("... (")


def test_rewrite_missing_end_marker_is_spliced_up_to_the_fixed_code() -> None:
    from evoduet_graph.candidates.diffs import extract_rewrite

    parent = (
        "import math\n\n# EVOLVE-BLOCK-START\nSTEP = 0.5\n# EVOLVE-BLOCK-END\n\n"
        "def run():\n    return STEP\n"
    )
    answer = (
        "```python\nimport math\n\n# EVOLVE-BLOCK-START\nSTEP = 0.75\n\n"
        "def run():\n    return STEP * 2\n```"
    )
    code = extract_rewrite(answer, parent, restrict_to_evolve_blocks=True)
    assert code is not None
    assert "STEP = 0.75" in code
    assert "# EVOLVE-BLOCK-END" in code
    assert code.endswith("def run():\n    return STEP\n")  # fixed code kept verbatim
    assert "STEP * 2" not in code


# ------------------------------------------------------------------------------------------
# imports a rewrite adds next to the fixed imports
# ------------------------------------------------------------------------------------------

USES_SQRT = """\
def solve(n):
    return int(sqrt(n * n)) + int(fsum([1.0]))
"""


def _rewrite_with_import(markers: bool, imports: str = "from math import sqrt, fsum\n") -> str:
    region = f"# EVOLVE-BLOCK-START\n{USES_SQRT}# EVOLVE-BLOCK-END\n" if markers else USES_SQRT
    return (
        "```python\nimport numpy as np\n"
        + imports
        + "\nLIMIT = 10\n\n\n"
        + region
        + "\n\ndef run():\n    total = 0\n    return solve(LIMIT) + total\n```"
    )


@pytest.mark.parametrize("markers", [True, False])
def test_rewrite_keeps_an_import_added_outside_the_evolve_block(markers: bool) -> None:
    """The import is moved to the top of the block instead of being dropped.

    The import is moved to the top of the block (the fixed code stays verbatim) instead of
    being dropped, which would make the child fail with a NameError.
    """
    cand = candidate_from_response(
        PARENT, _rewrite_with_import(markers), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.error is None and cand.code is not None
    start = cand.code.index("# EVOLVE-BLOCK-START\n") + len("# EVOLVE-BLOCK-START\n")
    assert cand.code[start:].startswith("from math import sqrt, fsum\ndef solve(n):")
    assert cand.code[:start] == PARENT[: PARENT.index("# EVOLVE-BLOCK-START\n")] + (
        "# EVOLVE-BLOCK-START\n"
    )
    namespace: dict[str, object] = {}
    exec(compile(cand.code, "child.py", "exec"), namespace)  # noqa: S102 - our own test program
    assert namespace["run"]() == 11  # type: ignore[operator]


def test_hoisted_imports_skip_future_and_duplicates_and_follow_the_block_indentation() -> None:
    rewrite = _rewrite_with_import(
        True, "from __future__ import annotations\nimport numpy as np\nimport math\n"
    ).replace("# EVOLVE-BLOCK-START\n", "# EVOLVE-BLOCK-START\nimport math\n")
    cand = candidate_from_response(
        PARENT, rewrite, diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code is not None
    assert "__future__" not in cand.code  # must stay first in a file: not moved into a block
    assert cand.code.count("import math") == 1 and cand.code.count("import numpy") == 1

    nested = (
        "def outer():\n    # EVOLVE-BLOCK-START\n    x = 1\n    # EVOLVE-BLOCK-END\n    return x\n"
    )
    answer = (
        "```python\nimport json\ndef outer():\n    # EVOLVE-BLOCK-START\n"
        "    x = len(json.dumps([1]))\n    # EVOLVE-BLOCK-END\n    return x\n```"
    )
    child = candidate_from_response(
        nested, answer, diff_based=False, restrict_to_evolve_blocks=True
    )
    assert child.code == (
        "def outer():\n    # EVOLVE-BLOCK-START\n    import json\n"
        "    x = len(json.dumps([1]))\n    # EVOLVE-BLOCK-END\n    return x\n"
    )


# ------------------------------------------------------------------ tabs vs spaces

SPACED = "def f(x):\n    if x:\n        y = 1\n    return x\n"


def test_a_tab_indented_search_block_applies_to_a_space_indented_program() -> None:
    text = "<<<<<<< SEARCH\n\tif x:\n\t\ty = 1\n=======\n\tif x:\n\t\ty = 2\n>>>>>>> REPLACE\n"
    result = apply_diff(SPACED, text, restrict_to_evolve_blocks=False)
    assert not result.failed, result.failed
    assert result.code == "def f(x):\n    if x:\n        y = 2\n    return x\n"


def test_a_space_indented_search_block_applies_to_a_tab_indented_program() -> None:
    tabbed = SPACED.replace("        ", "\t\t").replace("    ", "\t")
    text = (
        "<<<<<<< SEARCH\n    if x:\n        y = 1\n=======\n    if x:\n        y = 3\n"
        ">>>>>>> REPLACE\n"
    )
    result = apply_diff(tabbed, text, restrict_to_evolve_blocks=False)
    assert not result.failed, result.failed
    assert result.code == "def f(x):\n\tif x:\n\t\ty = 3\n\treturn x\n"


def test_a_tab_search_that_does_not_match_says_tabs_are_the_difference_it_tried() -> None:
    text = "<<<<<<< SEARCH\n\tif z:\n=======\n\tif x:\n>>>>>>> REPLACE\n"
    result = apply_diff(SPACED, text, restrict_to_evolve_blocks=False)
    assert len(result.failed) == 1
    assert "indented with tabs, the program with spaces" in result.failed[0]
    assert "not found" in result.failed[0]


def test_an_ambiguous_tab_width_is_refused_with_the_reason() -> None:
    # as 4 spaces the SEARCH matches line 2; as 8 spaces it matches line 4 (exactly)
    program = "def f():\n    a = 1\n    if b:\n        a = 1\n"
    text = "<<<<<<< SEARCH\n\ta = 1\n=======\n\ta = 5\n>>>>>>> REPLACE\n"
    result = apply_diff(program, text, restrict_to_evolve_blocks=False)
    assert len(result.failed) == 1 and "tab width is ambiguous" in result.failed[0]


SMOKE_LIKE = """import numpy as np

N = 12


# EVOLVE-BLOCK-START
def make_points():
    return np.zeros((N, 2))


# EVOLVE-BLOCK-END


def run():
    return make_points()
"""


def _rewrite(program: str) -> str:
    return f"```python\n{program}```"


def _run(code: str) -> object:
    namespace: dict[str, object] = {}
    exec(compile(code, "child.py", "exec"), namespace)  # noqa: S102 - our own test program
    return namespace["run"]()  # type: ignore[operator]


def test_new_constants_and_helpers_written_outside_the_block_are_moved_into_it() -> None:
    """A constant above the block and a helper below it, both used by the new block code.

    Only the block is taken from a rewrite; without moving them the child fails with a
    NameError (seen on the embedded model). The fixed code stays exactly the parent's.
    """
    rewrite = (
        SMOKE_LIKE.replace("N = 12\n", "N = 12\nSCALE = 0.5\n").replace(
            "    return np.zeros((N, 2))", "    return SCALE * ring(N)"
        )
        + "\n\ndef ring(n):\n    t = np.linspace(0, 2 * np.pi, n, endpoint=False)\n"
        + ("    return np.stack([np.cos(t), np.sin(t)], axis=1)\n")
    )
    cand = candidate_from_response(
        SMOKE_LIKE, _rewrite(rewrite), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.error is None and cand.code is not None
    block = cand.code.split("# EVOLVE-BLOCK-START\n")[1].split("# EVOLVE-BLOCK-END")[0]
    assert block.index("SCALE = 0.5") < block.index("def make_points") < block.index("def ring")
    outside = cand.code.replace(block, "")
    assert outside == SMOKE_LIKE.replace(
        SMOKE_LIKE.split("# EVOLVE-BLOCK-START\n")[1].split("# EVOLVE-BLOCK-END")[0], ""
    )
    points = _run(cand.code)
    assert np.allclose(np.hypot(*np.asarray(points).T), 0.5)


def test_a_definition_that_rebinds_fixed_code_or_the_block_is_not_moved() -> None:
    rewrite = SMOKE_LIKE.replace(
        "N = 12\n", "N = 13\nM = 3\n\n\ndef make_points():\n    return 0\n"
    )
    cand = candidate_from_response(
        SMOKE_LIKE, _rewrite(rewrite), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code is not None
    assert "N = 13" not in cand.code  # the fixed N stays the parent's
    assert cand.code.count("def make_points") == 1  # the block's own definition wins
    assert "M = 3" in cand.code.split("# EVOLVE-BLOCK-START")[1]  # a new name is moved
    assert np.asarray(_run(cand.code)).shape == (12, 2)


def test_outside_definitions_are_left_alone_for_an_indented_block_or_other_languages() -> None:
    nested = (
        "def outer():\n    # EVOLVE-BLOCK-START\n    x = 1\n    # EVOLVE-BLOCK-END\n    return x\n"
    )
    answer = (
        "```python\nK = 2\ndef outer():\n    # EVOLVE-BLOCK-START\n    x = K\n"
        "    # EVOLVE-BLOCK-END\n    return x\n```"
    )
    child = candidate_from_response(
        nested, answer, diff_based=False, restrict_to_evolve_blocks=True
    )
    assert child.code == nested.replace("    x = 1\n", "    x = K\n")
    js = "const n = 1;\n// EVOLVE-BLOCK-START\nlet x = n;\n// EVOLVE-BLOCK-END\n"
    reply = (
        "```javascript\nconst n = 1;\nconst k = 2;\n"
        "// EVOLVE-BLOCK-START\nlet x = k;\n// EVOLVE-BLOCK-END\n```"
    )
    out = candidate_from_response(
        js, reply, diff_based=False, restrict_to_evolve_blocks=True, language="javascript"
    )
    assert out.code is not None and "const k" not in out.code


def test_rewrite_that_kept_diff_markers_is_read_as_its_diff() -> None:
    # what a small model writes after seeing the context's diffs: the old line marked '-',
    # the new one '+'
    edit = "-        total += i\n+        total += 2 * i\n"
    marked = PARENT.replace("        total += i\n", edit)
    cand = candidate_from_response(
        PARENT, fenced(marked), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand == CandidateCode(PARENT.replace("total += i", "total += 2 * i"), "rewrite", None)


def test_rewrite_that_kept_a_whole_hunk_with_its_context_spaces_is_read_as_its_diff() -> None:
    # the hunk copied whole: its unchanged lines keep the diff's one leading space, which
    # indents them one column deeper than the lines around them
    parent = (
        "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n"
        "        total *= 2\n    return total\n"
    )
    marked = parent.replace(
        "        total += i\n        total *= 2\n",
        "-        total += i\n+        total += 3 * i\n         total *= 2\n",
    )
    cand = candidate_from_response(
        parent, fenced(marked), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand == CandidateCode(parent.replace("total += i", "total += 3 * i"), "rewrite", None)
    # the hunk's header copied too
    headed = marked.replace("-        total += i", "@@ -3,4 +3,4 @@\n-        total += i")
    cand = candidate_from_response(
        parent, fenced(headed), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand == CandidateCode(parent.replace("total += i", "total += 3 * i"), "rewrite", None)
    # blank lines written as a diff's marked blanks, the next definition with its context space
    two = "def g():\n    return 1\n\n\ndef h():\n    return g()\n"
    copied = "def g():\n    return 2\n-\n-\n+ \n+ \n def h():\n    return g()\n"
    cand = candidate_from_response(
        two, fenced(copied), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code is not None
    compile(cand.code, "child", "exec")
    assert "return 2" in cand.code and "\ndef h():" in cand.code


def test_rewrite_with_diff_markers_that_still_does_not_compile_is_kept_for_its_error() -> None:
    marked = PARENT.replace("        total += i\n", "+        total += (i\n")
    cand = candidate_from_response(
        PARENT, fenced(marked), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code is not None and "+        total += (i" in cand.code  # compile error later


def test_rewrite_minus_expression_that_compiles_is_left_alone() -> None:
    # a line starting with '-' that is valid Python (a continuation line) is not a diff marker
    code = PARENT.replace("        total += i\n", "        total += (i\n-1)\n")
    cand = candidate_from_response(
        PARENT, fenced(code), diff_based=False, restrict_to_evolve_blocks=True
    )
    assert cand.code == code
