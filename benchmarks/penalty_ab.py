"""A/B on recorded mutation prompts: the llama.cpp server's repeat penalty (1.1) vs none (1.0).

The bench serves the embedded model with llama-cpp-python's OpenAI-compatible server, whose
chat-completion requests default to ``repeat_penalty: 1.1`` when the client does not send one
(an OpenAI client never does), while ``evoduet run`` sampled the same model in process with
no penalty (1.0) until both were set to `evoduet_graph.llm.model_file.REPEAT_PENALTY`. A full
rewrite repeats the parent's code almost token for token, so a penalty on every token seen in
the last 64 could push the model off the names the program defines, or keep it from copying
its parent unchanged. This script measures which way it goes: the first ``--per-run``
first-attempt mutation prompts of each run folder, replayed with the same seed once per arm
(``penalty-1.1``, ``penalty-1.0``), every reply read as the run read it (full rewrites) and
its child evaluated in the sandbox. The first prompts of a task's seeds can be the same text
(the initial program, no attempts yet): the summary counts distinct prompts too.

    .venv/bin/python benchmarks/penalty_ab.py OUT.jsonl RUN_DIR [RUN_DIR ...] \
        [--per-run 2] [--seed 1]

RUN_DIR is a bench run's ``run/`` folder (``<bench>/runs/<task>/<method>/seed<k>/run``).
OUT.jsonl gets one line per (prompt, arm) and is read back on a rerun, so a killed A/B
continues where it stopped; the summary is printed at the end. The model is the embedded one
in-process (``local_parallel: 1``), temperature 0.7, 1,024 output tokens, as in the runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

from attempts_ab import append_row, child_outcome, open_run, read_rows, replay_parser

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model

ARMS = {"penalty-1.1": 1.1, "penalty-1.0": 1.0}


def first_prompts(run: Path, per_run: int) -> list[dict]:
    """The first ``per_run`` first-attempt mutation prompts of ``run`` (prompt log order)."""
    found = []
    for line in (run / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("attempt") == 0 and record.get("parent"):
            found.append(record)
        if len(found) == per_run:
            break
    return found


def prompt_sha(prompt: dict) -> str:
    """A short hash of the prompt's messages: equal prompts replayed for two runs count once."""
    return hashlib.sha256(json.dumps(prompt["messages"]).encode()).hexdigest()[:12]


def summarise(rows: list[dict]) -> dict:
    """Per arm: children and valid ones; pairs where only one arm's child is valid.

    ``distinct``: the same counts over distinct prompts (the first row of each prompt hash).
    """
    arms: dict[str, Counter] = {}
    for row in rows:
        counts = arms.setdefault(row["arm"], Counter())
        counts["children"] += 1
        counts["valid"] += row["valid"]
    pairs: dict[tuple, dict] = {}
    for row in rows:
        pairs.setdefault((row["run"], row["candidate"], row["seed"]), {})[row["arm"]] = row
    both = [p for p in pairs.values() if len(p) == len(ARMS)]
    distinct: dict[str, dict] = {}
    for pair in both:
        distinct.setdefault(pair["penalty-1.0"].get("prompt_sha", id(pair)), pair)
    return {
        "distinct": {
            "pairs": len(distinct),
            **{f"{arm}_valid": sum(p[arm]["valid"] for p in distinct.values()) for arm in ARMS},
            "only_1.0_valid": sum(
                p["penalty-1.0"]["valid"] and not p["penalty-1.1"]["valid"]
                for p in distinct.values()
            ),
            "only_1.1_valid": sum(
                p["penalty-1.1"]["valid"] and not p["penalty-1.0"]["valid"]
                for p in distinct.values()
            ),
        },
        "arms": {arm: dict(c) for arm, c in arms.items()},
        "pairs": len(both),
        "only_1.0_valid": sum(
            p["penalty-1.0"]["valid"] and not p["penalty-1.1"]["valid"] for p in both
        ),
        "only_1.1_valid": sum(
            p["penalty-1.1"]["valid"] and not p["penalty-1.0"]["valid"] for p in both
        ),
    }


def main() -> int:
    """Replay the prompts in both arms; print one JSON line per child and a summary."""
    args = replay_parser(__doc__ or "", per_run=2).parse_args()
    done, have = read_rows(args.out)
    model = make_local_chat_model(LLMConfig(model="local", local_parallel=1))
    for run in args.runs:
        label, task, evaluator, store = open_run(run)
        for prompt in first_prompts(run, args.per_run):
            parent = store.execute(
                "select code from programs where id = ?", (prompt["parent"],)
            ).fetchone()[0]
            messages = [(m["role"], m["content"]) for m in prompt["messages"]]
            for arm, penalty in ARMS.items():
                if (label, prompt["candidate"], args.seed, arm) in have:
                    continue
                reply = model.bind(seed=args.seed, repeat_penalty=penalty).invoke(messages)
                valid, error = child_outcome(
                    task, evaluator, parent, str(reply.content), prompt["candidate"]
                )
                row = {
                    "run": label,
                    "candidate": prompt["candidate"],
                    "prompt_sha": prompt_sha(prompt),
                    "seed": args.seed,
                    "arm": arm,
                    "valid": valid,
                    "error": error,
                }
                append_row(args.out, row, done)
    print(json.dumps(summarise(done), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
