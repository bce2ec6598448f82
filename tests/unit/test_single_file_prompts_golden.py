"""Single-file tasks' mutation prompts stay byte for byte what they were before folder programs.

``golden/single_file_<task>_<format>.txt`` were written by the tree before programs could be
folders, from a real context on two bundled single-file tasks (one Python, one C): the initial
program evaluated in the sandbox, a second evaluated child and a failed attempt in the store.
Folder support must not change a character of a single-file task's prompt: the embedded model
then writes the same child for a seed as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evoduet_graph.nodes.generate import generation_messages
from tests.conftest import ROOT
from tests.node_env import add_program, make_env

GOLDEN = Path(__file__).parent / "golden"

#: (task, the line the second program changes, its replacement)
TASKS = {
    "smoke_polygon_area": (
        "    radius = 0.6  # distance of every point from the origin (at most 1.0 is allowed)",
        "    radius = 0.9  # distance of every point from the origin (at most 1.0 is allowed)",
    ),
    "golomb_ruler_10_c": ("static void build_ruler(", "static void build_ruler( /* v2 */"),
}


def render_prompt(task: str, diff_based: bool) -> str:
    """The mutation prompt of iteration 2 on ``task``, as one text (message type + content)."""
    old, new = TASKS[task]
    # the failed attempt in full, as that tree showed it (the default now gives its outcome
    # line only: `prompt.failed_attempts`)
    env = make_env(ROOT / "tasks" / task, prompt__failed_attempts="details")
    initial = env.ctx.store.get_program(env.state["parent_id"])
    code = initial.code or ""
    assert old in code, f"{task}: the scripted change no longer applies"
    add_program(env, "it00001-c0", code.replace(old, new), 0.5, 1, metrics={"combined_score": 0.5})
    add_program(env, "it00001-c1", code + "\n", None, 1, error="timeout after 10 s")
    payload = {
        "iteration": 2,
        "index": 0,
        "parent_id": initial.id,
        "inspiration_ids": ["it00001-c0"],
        "documents": [],
    }
    messages = generation_messages(env.ctx, initial, ["it00001-c0"], 2, payload, diff_based)
    return "".join(f"=== {m.type}\n{m.content}\n" for m in messages)


@pytest.mark.parametrize("diff_based", [True, False], ids=["diff", "rewrite"])
@pytest.mark.parametrize("task", sorted(TASKS))
def test_single_file_prompt_is_unchanged(task: str, diff_based: bool) -> None:
    golden = GOLDEN / f"single_file_{task}_{'diff' if diff_based else 'rewrite'}.txt"
    assert render_prompt(task, diff_based) == golden.read_text(encoding="utf-8")


if __name__ == "__main__":  # write the golden files (only on the tree they must match)
    for name in sorted(TASKS):
        for diff in (True, False):
            out = GOLDEN / f"single_file_{name}_{'diff' if diff else 'rewrite'}.txt"
            out.write_text(render_prompt(name, diff), encoding="utf-8")
            print(out)
