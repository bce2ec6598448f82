"""A/B of how the context c_t shows the top programs and inspirations, on recorded prompts.

The context shows the current program in full and, by default, the top programs and the
inspirations as unified diffs against it (``prompt.other_programs: diff``). OpenEvolve shows
them as code. On the embedded 1.5B model, asked for a full rewrite, children were seen to
replay such a diff wrongly: a ``+`` marker kept at the start of a line (a syntax error), or the
added lines kept and a context line next to them dropped (a ``NameError`` on the dropped
name), often several times in a row. This script measures it on the mutation prompts a bench
actually sent: every first-attempt mutation prompt of the given run folders that shows at least
one top program or inspiration is replayed with the same seed once per arm: as recorded (arm
``diff``) and with each of those programs' diff replaced by its code from the run's program
store, fenced and cut as ``prompt.other_programs: code`` does it, under that form's section
notes (arm ``code``: the text `evoduet_graph.prompts.generate.context_message_text` writes for
that setting), and optionally (arm ``code-no-change``) with the ``Change:`` diff of every
recent attempt removed too, so that the prompt holds no diff at all, as OpenEvolve's prompt
for a full rewrite. ``--arms`` picks them (default ``diff,code``). Each reply is read as the
run read it (a full rewrite) and its child evaluated by the task's evaluator in the sandbox. ::

    .venv/bin/python benchmarks/context_ab.py OUT.jsonl RUN_DIR [RUN_DIR ...] \
        [--per-run 8] [--seed 1] [--arms diff,code,code-no-change]

RUN_DIR is a bench run's ``run/`` folder; OUT.jsonl gets one line per (prompt, arm) and is read
back on a rerun, so a killed A/B continues; the summary (per arm: children, valid, and, paired
with ``diff``, the prompts where only one arm's child is valid) is printed at the end. The
model is the embedded one in-process at the runs' sampling settings, as in ``attempts_ab.py``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import Counter

from attempts_ab import (
    _CHANGE_BLOCK,
    append_row,
    attempt_blocks,
    child_outcome,
    join_blocks,
    open_run,
    read_rows,
    replay_parser,
)

from evoduet_graph.config import LLMConfig, PromptConfig
from evoduet_graph.llm import make_local_chat_model
from evoduet_graph.prompts import load_prompt
from evoduet_graph.prompts.generate import other_program_body
from evoduet_graph.tasks.languages import Language, language_by_name

SECTIONS = ("## Top programs", "## Inspirations")
# a program's heading and metrics line, then its diff fence (the fence may be longer than 3)
_BLOCK = re.compile(
    r"(### (\S+) \(iteration [^\n]*\n(?:Metrics: [^\n]*\n)?)(`{3,})diff\n.*?\n\3(?=\n|$)", re.S
)


def _notes(template: str) -> dict[str, str]:
    """The line under each section heading of a context template: the section's note."""
    lines = load_prompt(template).splitlines()
    return {h: lines[lines.index(h) + 1] for h in SECTIONS}


def shows_other_programs(user: str) -> bool:
    """Whether the user message shows a top program or an inspiration."""
    return any(h in user for h in SECTIONS) and bool(_BLOCK.search(user))


def as_code(user: str, store: sqlite3.Connection, lang: Language, max_chars: int) -> str:
    """The user message with each other program's diff replaced by its code.

    The section notes become ``prompts/context_code.md``'s; the recent attempts keep their diffs.
    """
    for heading, note in _notes("context").items():
        user = user.replace(
            f"{heading}\n{note}\n", f"{heading}\n{_notes('context_code')[heading]}\n"
        )

    def code_of(match: re.Match[str]) -> str:
        row = store.execute("select code from programs where id = ?", (match[2],)).fetchone()
        return match[1] + other_program_body(row[0], "", max_chars, lang)

    head, sep, rest = user.partition("## Recent attempts")  # attempts keep their diffs
    return _BLOCK.sub(code_of, head) + sep + rest


def without_changes(user: str) -> str:
    """The user message with the ``Change:`` diff of every recent attempt removed."""
    head, blocks, rest = attempt_blocks(user)
    return join_blocks(head, [_CHANGE_BLOCK.sub("", b, count=1) for b in blocks], rest)


ARMS = ("diff", "code", "code-no-change")


def summarise(rows: list[dict]) -> dict:
    """Per arm: children and valid; every other arm paired with ``diff`` (same prompt, seed)."""
    arms: dict[str, Counter] = {}
    pairs: dict[tuple, dict] = {}
    for row in rows:
        counts = arms.setdefault(row["arm"], Counter())
        counts["children"] += 1
        counts["valid"] += row["valid"]
        pairs.setdefault((row["run"], row["candidate"], row["seed"]), {})[row["arm"]] = row
    out: dict = {"arms": {a: dict(c) for a, c in arms.items()}}
    for arm in sorted(set(arms) - {"diff"}):
        both = [p for p in pairs.values() if {"diff", arm} <= p.keys()]
        out[f"{arm} vs diff"] = {
            "pairs": len(both),
            f"only_{arm}_valid": sum(p[arm]["valid"] and not p["diff"]["valid"] for p in both),
            "only_diff_valid": sum(p["diff"]["valid"] and not p[arm]["valid"] for p in both),
        }
    return out


def main() -> int:
    """Replay the qualifying prompts in both arms; print one JSON line per child and a summary."""
    parser = replay_parser(__doc__ or "", per_run=8)
    parser.add_argument("--arms", default="diff,code", help="of " + ", ".join(ARMS))
    args = parser.parse_args()
    done, have = read_rows(args.out)
    model = make_local_chat_model(LLMConfig(model="local", local_parallel=1)).bind(seed=args.seed)
    max_chars = PromptConfig().max_program_chars
    for run in args.runs:
        label, task, evaluator, store = open_run(run)
        lang = language_by_name(task.language)
        prompts = []
        for line in (run / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            user = next(m["content"] for m in record["messages"] if m["role"] == "user")
            if record.get("attempt") == 0 and shows_other_programs(user):
                prompts.append(record)
        for prompt in prompts[: args.per_run]:
            parent = store.execute(
                "select code from programs where id = ?", (prompt["parent"],)
            ).fetchone()[0]
            for arm in args.arms.split(","):
                if (label, prompt["candidate"], args.seed, arm) in have:
                    continue
                messages = []
                for m in prompt["messages"]:
                    text = m["content"]
                    if arm != "diff" and m["role"] == "user":
                        text = as_code(text, store, lang, max_chars)
                    if arm == "code-no-change" and m["role"] == "user":
                        text = without_changes(text)
                    messages.append((m["role"], text))
                reply = model.invoke(messages)
                valid, error = child_outcome(
                    task, evaluator, parent, str(reply.content), prompt["candidate"]
                )
                row = {"run": label, "candidate": prompt["candidate"], "seed": args.seed}
                row |= {"arm": arm, "valid": bool(valid), "error": error}
                append_row(args.out, row, done)
    print(json.dumps(summarise(done), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
