"""A/B of the recent-attempts section on recorded prompts: what it shows of failed attempts.

The context c_t lists the last attempts with their outcome, error, change (a diff against their
parent) and artifact tails. On the embedded 1.5B model a child often repeats, line for line, a
failed change that the section shows it, with the same error. This script measures that on the
mutation prompts a bench actually sent: every first-attempt mutation prompt of the given run
folders whose recent attempts show at least one invalid attempt with its change is replayed
with the same seed once per arm: as recorded (arm ``shown``), with the ``Change:`` block of
each invalid attempt removed (arm ``hidden``: the error and the traceback stay), and with only
each invalid attempt's head line kept (arm ``outcome``: no error, change or traceback, close to
OpenEvolve's history, which gives a failed attempt's change summary and metrics only). ``--arms``
picks the arms (default ``shown,hidden``). Each reply
is read as the run read it (full rewrites) and its child evaluated by the task's evaluator in
the sandbox. Per pair: valid or not, the error, and whether the error is one the prompt showed.

    .venv/bin/python benchmarks/attempts_ab.py OUT.jsonl RUN_DIR [RUN_DIR ...] \
        [--per-run 2] [--seed 1]
    .venv/bin/python benchmarks/attempts_ab.py --observe RUN_DIR [RUN_DIR ...]

``--observe`` calls no model: it reads what the runs themselves did, every first-attempt child
split by whether its prompt showed an invalid attempt, and counts the valid ones and the ones
that failed with an error the prompt showed.

RUN_DIR is a bench run's ``run/`` folder (``<bench>/runs/<task>/<method>/seed<k>/run``); its
task is the bundled task of the bench record's name. OUT.jsonl gets one line per (prompt, arm)
and is read back on a rerun, so a killed A/B continues where it stopped; the summary is printed
at the end. The model is the embedded one in-process (``local_parallel: 1``), at the runs'
sampling settings (temperature 0.7, 1,024 output tokens).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from evoduet_graph.bench.common import bundled_tasks_dir
from evoduet_graph.candidates.diffs import candidate_from_response
from evoduet_graph.config import LLMConfig
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.llm import make_local_chat_model
from evoduet_graph.task import Task, load_task

ATTEMPTS_HEAD = "## Recent attempts"
_CHANGE_BLOCK = re.compile(r"\nChange:\n```diff\n.*?\n```", re.S)


def attempt_blocks(user: str) -> tuple[str, list[str], str]:
    """The user message split into the text before the first attempt, the attempts, the rest.

    One block per attempt; the rest is what follows the section (from its next ``## `` heading
    on: the mutation's own part, task and output format), or "". ``join_blocks`` puts them
    back together: the message as it was.
    """
    head, _, section = user.partition(ATTEMPTS_HEAD)
    section, heading, rest = section.partition("\n## ")
    parts = section.split("\n### Iteration ")
    blocks = ["### Iteration " + p for p in parts[1:]]
    return head + ATTEMPTS_HEAD + parts[0], blocks, heading + rest


def join_blocks(head: str, blocks: list[str], rest: str) -> str:
    """The inverse of `attempt_blocks`."""
    return "\n".join([head, *blocks]) + rest


def is_invalid(block: str) -> bool:
    """Whether an attempt block's head line reports an invalid child."""
    return ": invalid" in block.split("\n", 1)[0]


def shown_errors(user: str) -> list[str]:
    """The ``Error:`` lines of the invalid attempts the prompt shows."""
    _, blocks, _ = attempt_blocks(user)
    return [
        line[len("Error: ") :].strip()
        for block in blocks
        if is_invalid(block)
        for line in block.split("\n")
        if line.startswith("Error: ")
    ]


def outcome_only(user: str) -> str:
    """The user message with every invalid attempt cut to its head line."""
    head, blocks, rest = attempt_blocks(user)
    kept = [b.split("\n", 1)[0] + "\n" if is_invalid(b) else b for b in blocks]
    return join_blocks(head, kept, rest)


def hide_failed_changes(user: str) -> str:
    """The user message with the ``Change:`` block of every invalid attempt removed."""
    head, blocks, rest = attempt_blocks(user)
    kept = [_CHANGE_BLOCK.sub("", b, count=1) if is_invalid(b) else b for b in blocks]
    return join_blocks(head, kept, rest)


def read_rows(out: Path) -> tuple[list[dict], set[tuple]]:
    """The rows an earlier invocation wrote to ``out`` and their (run, candidate, seed, arm)."""
    done = (
        [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]
        if out.exists()
        else []
    )
    return done, {(r["run"], r["candidate"], r["seed"], r["arm"]) for r in done}


def append_row(out: Path, row: dict, rows: list[dict]) -> None:
    """Add ``row`` to ``rows``, write it to ``out`` at once (a killed A/B keeps it), print it."""
    rows.append(row)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def replay_parser(doc: str, per_run: int) -> argparse.ArgumentParser:
    """The arguments of a replay A/B: OUT.jsonl, the run folders, ``--per-run``, ``--seed``."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--per-run", type=int, default=per_run)
    parser.add_argument("--seed", type=int, default=1)
    return parser


def open_run(run: Path) -> tuple[str, Task, SandboxEvaluator, sqlite3.Connection]:
    """A bench run folder's label (task/method/seed), bundled task, evaluator and store."""
    record = json.loads((run.parent / "bench_run.json").read_text(encoding="utf-8"))
    label = f"{record['task']}/{record['method']}/seed{record['seed']}"
    task = load_task(bundled_tasks_dir() / record["task"])
    return label, task, SandboxEvaluator(task, workers=1), sqlite3.connect(run / "programs.sqlite")


def child_outcome(
    task: Task, evaluator: SandboxEvaluator, parent: str, reply: str, candidate: str
) -> tuple[bool, str | None]:
    """Read ``reply`` as the runs read it (a full rewrite of ``parent``) and evaluate the child.

    Returns:
        (valid, error): a reply with no program, or one that leaves ``parent`` unchanged, is
        invalid without an evaluation.
    """
    cand = candidate_from_response(
        parent,
        reply,
        diff_based=False,
        restrict_to_evolve_blocks=task.has_evolve_blocks,
        language=task.language,
    )
    if cand.code is None or cand.error:
        return False, cand.error or "no program in the reply"
    if cand.code == parent:
        return False, "unchanged"
    outcome = evaluator.evaluate(cand.code, candidate)
    return bool(outcome.valid), outcome.error


def qualifying_prompts(run: Path, per_run: int) -> list[dict]:
    """The first ``per_run`` first-attempt prompts showing an invalid attempt with its change."""
    found = []
    for line in (run / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("attempt") != 0:
            continue
        user = next(m["content"] for m in record["messages"] if m["role"] == "user")
        _, blocks, _ = attempt_blocks(user)
        if any(is_invalid(b) and _CHANGE_BLOCK.search(b) for b in blocks):
            found.append(record)
        if len(found) == per_run:
            break
    return found


def summarise(rows: list[dict]) -> dict:
    """Per arm: children, valid, invalid with an error the prompt showed.

    Each other arm is paired with ``shown`` (same prompt and seed): pairs, and pairs where only
    one of the two children is valid.
    """
    out: dict[str, Counter] = {}
    for row in rows:
        counts = out.setdefault(row["arm"], Counter())
        counts["children"] += 1
        counts["valid"] += row["valid"]
        counts["repeated_shown_error"] += row["repeated_shown_error"]
    prompts: dict[tuple, dict] = {}
    for row in rows:
        prompts.setdefault((row["run"], row["candidate"], row["seed"]), {})[row["arm"]] = row
    versus = {}
    for arm in sorted(set(out) - {"shown"}):
        both = [p for p in prompts.values() if arm in p and "shown" in p]
        versus[f"{arm} vs shown"] = {
            "pairs": len(both),
            f"only_{arm}_valid": sum(p[arm]["valid"] and not p["shown"]["valid"] for p in both),
            "only_shown_valid": sum(p["shown"]["valid"] and not p[arm]["valid"] for p in both),
        }
    return {"arms": {arm: dict(c) for arm, c in out.items()}, **versus}


def observe(runs: list[Path]) -> dict[str, Counter]:
    """What the runs did: first-attempt children by whether their prompt showed a failure."""
    out: dict[str, Counter] = {}
    for run in runs:
        store = sqlite3.connect(run / "programs.sqlite")
        programs = {
            row[0]: (bool(row[1]), row[2])
            for row in store.execute("select id, valid, error from programs")
        }
        for line in (run / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("attempt") != 0 or record["candidate"] not in programs:
                continue
            valid, error = programs[record["candidate"]]
            user = next(m["content"] for m in record["messages"] if m["role"] == "user")
            errors = shown_errors(user)
            counts = out.setdefault("failure shown" if errors else "no failure shown", Counter())
            counts["children"] += 1
            counts["valid"] += valid
            counts["repeated_shown_error"] += bool(
                not valid and error and any(error.strip()[:120] == e[:120] for e in errors)
            )
    return out


ARMS = {"shown": lambda user: user, "hidden": hide_failed_changes, "outcome": outcome_only}


def main() -> int:
    """Replay the qualifying prompts in both arms; print one JSON line per child and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--per-run", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--arms", default="shown,hidden", help="of " + ", ".join(ARMS))
    parser.add_argument("--observe", action="store_true", help="count what the runs did; no model")
    args = parser.parse_args()
    if args.observe:
        runs = [args.out, *args.runs] if args.out else args.runs
        print(json.dumps({k: dict(v) for k, v in observe(runs).items()}, indent=2))
        return 0
    done, have = read_rows(args.out)
    model = make_local_chat_model(LLMConfig(model="local", local_parallel=1)).bind(seed=args.seed)
    for run in args.runs:
        label, task, evaluator, store = open_run(run)
        for prompt in qualifying_prompts(run, args.per_run):
            parent = store.execute(
                "select code from programs where id = ?", (prompt["parent"],)
            ).fetchone()[0]
            user = next(m["content"] for m in prompt["messages"] if m["role"] == "user")
            errors = shown_errors(user)
            for arm in args.arms.split(","):
                if (label, prompt["candidate"], args.seed, arm) in have:
                    continue
                messages = [
                    {**m, "content": ARMS[arm](m["content"])} if m["role"] == "user" else m
                    for m in prompt["messages"]
                ]
                reply = model.invoke([(m["role"], m["content"]) for m in messages])
                valid, error = child_outcome(
                    task, evaluator, parent, str(reply.content), prompt["candidate"]
                )
                row = {
                    "run": label,
                    "candidate": prompt["candidate"],
                    "seed": args.seed,
                    "arm": arm,
                    "valid": bool(valid),
                    "error": error,
                    "repeated_shown_error": bool(
                        error and any(error.strip()[:120] == e[:120] for e in errors)
                    ),
                }
                append_row(args.out, row, done)
    print(json.dumps(summarise(done), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
