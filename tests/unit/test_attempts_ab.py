"""The prompt A/Bs on recorded prompts (`attempts_ab.py`, `penalty_ab.py`, `context_ab.py`)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from pathlib import Path

from evoduet_graph.config import PromptConfig
from evoduet_graph.prompts.generate import AttemptView, ProgramView, context_message_text

_SPEC = importlib.util.spec_from_file_location(
    "attempts_ab", Path(__file__).parents[2] / "benchmarks" / "attempts_ab.py"
)
assert _SPEC is not None and _SPEC.loader is not None
ab = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ab)

PARENT = ProgramView(id="p", code="def f():\n    return 1\n", score=0.5, metrics={}, iteration=2)
FAILED = AttemptView(
    3,
    "p",
    "invalid: NameError: name 'x' is not defined",
    None,
    "NameError: name 'x' is not defined",
    {"traceback": "line 2\nNameError: name 'x'"},
    "@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return x",
)
IMPROVED = AttemptView(
    4, "p", "improved", 0.7, None, {}, "@@ -2 +2 @@\n-    return 1\n+    return 2"
)


def _context(attempts: list[AttemptView]) -> str:
    return context_message_text(
        parent=PARENT,
        top=[],
        inspirations=[],
        attempts=attempts,
        cfg=PromptConfig(diff_based=False, failed_attempts="details"),
    )


def test_the_hidden_arm_drops_only_the_failed_attempts_change():
    text = _context([FAILED, IMPROVED])
    assert text.count("Change:") == 2
    hidden = ab.hide_failed_changes(text)
    # the failed change is gone, its error and traceback stay; the improved change stays
    assert "+    return x" not in hidden and "+    return 2" in hidden
    assert hidden.count("Change:") == 1
    assert "Error: NameError: name 'x' is not defined" in hidden and "line 2" in hidden
    assert ab.shown_errors(text) == ["NameError: name 'x' is not defined"]
    # nothing else of the message changes
    block = "\nChange:\n```diff\n" + FAILED.diff_summary + "\n```"
    assert block in text and hidden == text.replace(block, "", 1)


def test_a_prompt_without_failed_attempts_is_left_as_it_is():
    text = _context([IMPROVED])
    assert ab.hide_failed_changes(text) == text
    assert ab.shown_errors(text) == []


def test_observe_counts_children_by_whether_their_prompt_showed_a_failure(tmp_path):
    store = sqlite3.connect(tmp_path / "programs.sqlite")
    store.execute("create table programs (id text, valid integer, error text)")
    store.executemany(
        "insert into programs values (?, ?, ?)",
        [
            ("c1", 0, "NameError: name 'x' is not defined"),  # repeats the shown failure
            ("c2", 1, None),
            ("c3", 0, "SyntaxError: invalid syntax"),
        ],
    )
    store.commit()
    failed, clean = _context([FAILED, IMPROVED]), _context([IMPROVED])
    records = [
        {"candidate": "c1", "attempt": 0, "messages": [{"role": "user", "content": failed}]},
        {"candidate": "c1", "attempt": 1, "messages": [{"role": "user", "content": failed}]},
        {"candidate": "c2", "attempt": 0, "messages": [{"role": "user", "content": failed}]},
        {"candidate": "c3", "attempt": 0, "messages": [{"role": "user", "content": clean}]},
    ]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    counts = ab.observe([tmp_path])
    assert counts["failure shown"] == {"children": 2, "valid": 1, "repeated_shown_error": 1}
    assert counts["no failure shown"] == {"children": 1, "valid": 0, "repeated_shown_error": 0}


def test_the_outcome_arm_keeps_only_the_failed_attempts_head_line():
    text = _context([FAILED, IMPROVED])
    outcome = ab.outcome_only(text)
    # the failed attempt: head line only (no error, change or traceback)
    assert "Iteration 3, from p: invalid" in outcome
    assert "NameError" not in outcome and "return x" not in outcome and "line 2" not in outcome
    # the improved attempt and everything before the section are as they were
    assert "+    return 2" in outcome
    assert outcome.split("## Recent attempts")[0] == text.split("## Recent attempts")[0]
    assert ab.outcome_only(_context([IMPROVED])) == _context([IMPROVED])


def test_the_arms_keep_what_follows_the_attempts_section():
    own_part = "\n\n## Task\nImprove the current program.\n\n## Output format\nA code block."
    message = _context([IMPROVED, FAILED]) + own_part  # the failed attempt is the last one
    assert ab.join_blocks(*ab.attempt_blocks(message)) == message
    for arm in (ab.outcome_only, ab.hide_failed_changes):
        assert arm(message).endswith(own_part)
    assert "Iteration 3, from p: invalid\n\n## Task" in ab.outcome_only(message)


def test_each_arm_is_paired_with_the_prompt_as_recorded():
    row = {"run": "r", "seed": 1, "repeated_shown_error": False}
    rows = [
        {**row, "candidate": "a", "arm": "shown", "valid": False},
        {**row, "candidate": "a", "arm": "outcome", "valid": True},
        {**row, "candidate": "b", "arm": "shown", "valid": True},
        {**row, "candidate": "b", "arm": "outcome", "valid": True},
        {**row, "candidate": "c", "arm": "hidden", "valid": False},  # no shown child: unpaired
    ]
    summary = ab.summarise(rows)
    assert summary["outcome vs shown"] == {
        "pairs": 2,
        "only_outcome_valid": 1,
        "only_shown_valid": 0,
    }
    assert summary["hidden vs shown"]["pairs"] == 0
    assert summary["arms"]["shown"] == {"children": 2, "valid": 1, "repeated_shown_error": 0}


def _load_with_attempts_ab(name: str):
    """A benchmark script that imports ``attempts_ab`` by its plain name, as it runs."""
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).parents[2] / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    return module


def test_the_penalty_ab_counts_a_prompt_replayed_for_two_runs_once():
    pa = _load_with_attempts_ab("penalty_ab")
    rows = [
        {"run": run, "candidate": "it1", "seed": 1, "prompt_sha": sha, "arm": arm, "valid": ok}
        for run, sha, arm, ok in [
            ("s1", "same", "penalty-1.1", True),
            ("s1", "same", "penalty-1.0", False),
            ("s2", "same", "penalty-1.1", True),  # the same prompt, replayed for seed 2
            ("s2", "same", "penalty-1.0", False),
            ("s2", "other", "penalty-1.1", False),
            ("s2", "other", "penalty-1.0", True),
        ]
    ]
    rows[4]["candidate"] = rows[5]["candidate"] = "it2"
    summary = pa.summarise(rows)
    assert summary["pairs"] == 3 and summary["only_1.1_valid"] == 2
    assert summary["distinct"] == {
        "pairs": 2,
        "penalty-1.1_valid": 1,
        "penalty-1.0_valid": 1,
        "only_1.0_valid": 1,
        "only_1.1_valid": 1,
    }


def test_the_context_ab_code_arm_is_what_the_code_setting_builds(tmp_path):
    """The A/B's ``code`` arm, made from a recorded ``diff`` prompt, is the builder's text."""
    from evoduet_graph.tasks.languages import language_by_name

    cx = _load_with_attempts_ab("context_ab")
    top = ProgramView(id="t", code="def f():\n    return 3\n", score=0.9, metrics={}, iteration=5)
    other = ProgramView(
        id="i", code="def f():\n    y = 4\n    return y\n", score=0.6, metrics={}, iteration=4
    )
    store = sqlite3.connect(tmp_path / "programs.sqlite")
    store.execute("create table programs (id text, code text)")
    store.executemany("insert into programs values (?, ?)", [(p.id, p.code) for p in (top, other)])
    own_part = "\n\n## Task\nImprove the current program."

    def context(form: str) -> str:
        cfg = PromptConfig(diff_based=False, other_programs=form)
        text = context_message_text(
            parent=PARENT, top=[top], inspirations=[other], attempts=[IMPROVED], cfg=cfg
        )
        return text + own_part

    recorded = context("diff")
    assert cx.shows_other_programs(recorded) and "+    return 3" in recorded
    replayed = cx.as_code(recorded, store, language_by_name("python"), 12000)
    assert replayed == context("code")
    assert "```python\ndef f():\n    return 3\n```" in replayed
    assert "+    return 2" in replayed  # the recent attempt keeps its change
    no_diff = cx.without_changes(replayed)  # the code-no-change arm: no diff left at all
    assert "```diff" not in no_diff and "Change:" not in no_diff
    assert no_diff.endswith(own_part) and "### Iteration 4, from p: improved" in no_diff
    assert not cx.shows_other_programs(_context([IMPROVED]))
