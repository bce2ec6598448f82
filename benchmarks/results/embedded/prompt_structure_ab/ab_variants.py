"""The prompt-structure A/B of ``prompt_structure_ab.md`` (a record; it runs on ``b2679e6``).

It rebuilds the first-iteration mutation prompt of ``tasks/smoke_polygon_area`` that tree's
builder wrote (one user message: preamble, task, parent, attempts, then the mutation job) in
three structures, with the same text:

* ``cur``: that single user message;
* ``sysfull``: a system message with the role, the task and the how-to-work rules, then a user
  message with the parent, the attempts and the rest of the job (OpenEvolve's order);
* ``sysneutral``: a system message with the role, the preamble and the task only, the rules
  staying in the user message after the parent.

Usage, from the root of a ``b2679e6`` checkout, under the model lock::

    python ab_variants.py show
    python ab_variants.py sysneutral,sysfull,cur OUT 1,2,3,4,5,6,7,8

One JSON line per reply on stdout; each child is written to ``OUT/<variant>-seed<k>.py`` for
``evoduet eval tasks/smoke_polygon_area FILE``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage

sys.path.insert(0, "benchmarks")
import batch_bench  # noqa: E402

from evoduet_graph.candidates.diffs import candidate_from_response  # noqa: E402
from evoduet_graph.config import LLMConfig  # noqa: E402
from evoduet_graph.llm import make_local_chat_model  # noqa: E402

ROLE = (
    "You are an expert programmer who improves a Python program step by step. An automatic "
    "evaluator runs every version you propose and scores it; a higher score is better. A "
    "version that crashes, times out or returns invalid results gets no score."
)
JOB = "## Your job now: the next child program\n"


def variants() -> tuple[dict[str, list], object]:
    """The three message structures of the same first-iteration prompt, and the task."""
    msgs, task = batch_bench.generation_prompt(Path("tasks/smoke_polygon_area"))
    head, rest = str(msgs[0].content).split("## Parent program", 1)
    rest = "## Parent program" + rest
    preamble, instruction = head.split("## Task", 1)
    instruction = instruction.strip()
    context, job = rest.split(JOB, 1)
    _, job_rest = job.split("\n", 1)  # drop the role line
    rules = [ln for ln in job_rest.split("\n## ")[0].splitlines() if ln.startswith("- ")]
    after_rules = "\n## " + job_rest.split("\n## ", 1)[1]
    system_full = f"{ROLE}\n\n# Task\n{instruction}\n\n# How to work\n" + "\n".join(rules)
    system_neutral = ROLE + "\n" + preamble.strip() + "\n\n# Task\n" + instruction
    return {
        "cur": msgs,
        "sysfull": [
            SystemMessage(system_full),
            HumanMessage(context.rstrip() + "\n" + after_rules),
        ],
        "sysneutral": [
            SystemMessage(system_neutral),
            HumanMessage(context.rstrip() + "\n\n" + JOB + "\n".join(rules) + "\n" + after_rules),
        ],
    }, task


def main() -> int:
    """Show the variants, or sample one reply per (seed, variant) and write the children."""
    table, task = variants()
    if sys.argv[1] == "show":
        for name, messages in table.items():
            print("=" * 30, name)
            for m in messages:
                print(f"--- {m.type}\n{m.content}")
        return 0
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    model = make_local_chat_model(LLMConfig(model="local", local_parallel=1))
    for seed in [int(s) for s in sys.argv[3].split(",")]:
        for name in sys.argv[1].split(","):
            started = time.time()
            reply = model.bind(seed=seed).invoke(table[name])
            (out / f"{name}-seed{seed}.reply.txt").write_text(str(reply.content))
            cand = candidate_from_response(
                task.initial_program,  # type: ignore[attr-defined]
                str(reply.content),
                diff_based=False,
                restrict_to_evolve_blocks=task.has_evolve_blocks,  # type: ignore[attr-defined]
                language=task.language,  # type: ignore[attr-defined]
            )
            if cand.code is not None and cand.error is None:
                (out / f"{name}-seed{seed}.py").write_text(cand.code)
            wall = round(time.time() - started, 1)
            print(json.dumps({"v": name, "seed": seed, "wall": wall, "error": cand.error}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
