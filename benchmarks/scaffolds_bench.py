"""The four scaffolds on one task with the embedded local model: best score, NDG, LLM calls and
wall time, each against the ``openevolve`` scaffold measured in the same invocation.

Every scaffold runs the full method (``gate.mode: llm`` with the offline search backend, so
the inner query loop runs) from its ablation file: ``configs/evoduet.yaml`` (openevolve),
``configs/scaffold_top_k.yaml``, ``configs/scaffold_best_of_n.yaml`` and
``configs/scaffold_evox.yaml``, with the same seed, iteration count and chat model (one
in-process instance of the embedded Qwen2.5-Coder-1.5B GGUF, shared by the runs). Options
shrink what a short run cannot show: ``--evox-patience`` (default 1, so the strategy loop
revises within 3 iterations) and ``--best-of-n`` (N of best_of_n; default: the file's 4).

Run (the model is one process at a time on this machine)::

    flock /tmp/evoduet_model.lock .venv/bin/python benchmarks/scaffolds_bench.py \\
        --task sums_diffs --iterations 3 --out benchmarks/results/scaffolds/script

Writes ``<out>/summary.md`` and ``<out>/summary.json`` (the table, the EvoX strategies and
the exact settings); the run directories go to ``<out>/runs/<scaffold>/`` (not committed).
A run directory that already holds a finished run of the requested length is reused (delete
it to measure again).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from evoduet_graph import load_task, run
from evoduet_graph.api import make_checked_searcher
from evoduet_graph.bench.common import Session, floored_ndg
from evoduet_graph.bench.graph_method import graph_outcome
from evoduet_graph.bench.runner import resolve_tasks
from evoduet_graph.config import EvoDuetConfig, load_config
from evoduet_graph.rundir.events import read_events
from evoduet_graph.scaffolds.evox import StrategyLog

CONFIGS = {
    "openevolve": ROOT / "configs" / "evoduet.yaml",
    "top_k": ROOT / "configs" / "scaffold_top_k.yaml",
    "best_of_n": ROOT / "configs" / "scaffold_best_of_n.yaml",
    "evox": ROOT / "configs" / "scaffold_evox.yaml",
}
REFERENCE = "openevolve"


def scaffold_config(name: str, args: argparse.Namespace) -> EvoDuetConfig:
    """The ablation file of scaffold ``name`` with this invocation's overrides."""
    cfg = load_config(CONFIGS[name])
    overrides: dict[str, Any] = {
        "iterations": args.iterations,
        "seed": args.seed,
        "llm.model": args.model,
        "evaluation.workers": 1,
    }
    if name == "evox":
        overrides["evox.strategy_patience"] = args.evox_patience
    if name == "best_of_n" and args.best_of_n is not None:
        overrides["candidates"] = args.best_of_n
    cfg = cfg.with_overrides(overrides)
    assert cfg.scaffold == name, (name, cfg.scaffold)
    return cfg


def _gate_decisions(run_dir: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ev in read_events(run_dir / "events.jsonl"):
        if ev.get("event") == "node" and ev.get("node") == "gate" and ev.get("gate_decision"):
            counts[ev["gate_decision"]] = counts.get(ev["gate_decision"], 0) + 1
    return counts


def run_scaffold(name: str, args: argparse.Namespace, llm: Any, out: Path) -> dict[str, Any]:
    """One run of scaffold ``name``; returns its row of the table."""
    task = load_task(args.task_dir)
    cfg = scaffold_config(name, args)
    run_dir = out / "runs" / name
    done = run_dir / "bench_row.json"
    if done.is_file():
        row = json.loads(done.read_text(encoding="utf-8"))
        if row.get("iterations") == args.iterations and row.get("seed") == args.seed:
            print(f"[{name}] reusing {run_dir}", flush=True)
            return row
    if run_dir.exists():
        shutil.rmtree(run_dir)
    searcher = make_checked_searcher(task, cfg)  # the offline index: built / loaded untimed
    print(f"[{name}] {args.iterations} iterations on {task.name} ...", flush=True)
    start = time.time()
    t0 = time.perf_counter()
    result = run(task, cfg, llm=llm, run_dir=run_dir, searcher=searcher)
    wall = time.perf_counter() - t0
    outcome = graph_outcome(
        task, run_dir, result.iterations, [Session(start=start, end=start + wall)]
    )
    strategies = [
        {k: r.get(k) for k in ("iteration", "status", "strategy", "previous", "method")}
        for r in StrategyLog.for_run(run_dir).records()
    ]
    row = {
        "scaffold": name,
        "iterations": result.iterations,
        "seed": args.seed,
        "candidates": cfg.candidates,
        "population": cfg.population.kind,
        "initial": outcome.initial,
        "best": outcome.best,
        "ndg": floored_ndg(task, outcome.best),
        "llm_calls": outcome.llm_calls,
        "tokens": outcome.tokens,
        "wall_s": round(wall, 1),
        "gate_decisions": _gate_decisions(run_dir),
        "valid_programs": outcome.details.get("valid_programs"),
        "stop_reason": result.stop_reason,
        "strategies": strategies,
    }
    done.write_text(json.dumps(row, indent=2), encoding="utf-8")
    print(
        f"[{name}] best {row['best']}  NDG {row['ndg']}  calls {row['llm_calls']}  "
        f"wall {row['wall_s']} s",
        flush=True,
    )
    return row


def _num(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _ratio(value: Any, reference: Any) -> str:
    if value is None or not reference:
        return "n/a"
    return f"{value / reference:.2f}"


def table(rows: list[dict[str, Any]], metric: str) -> str:
    """The markdown table: one row per scaffold, ratios against the reference scaffold."""
    ref = next((r for r in rows if r["scaffold"] == REFERENCE), None)
    head = (
        f"| scaffold | population | N | best {metric} | NDG % | LLM calls | calls / {REFERENCE} "
        f"| tokens | wall s | wall / {REFERENCE} | gate decisions | strategy revisions |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        revised = sum(1 for s in r["strategies"] if s["status"] == "revised")
        failed = sum(1 for s in r["strategies"] if s["status"] in ("failed", "error"))
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(r["gate_decisions"].items()))
        lines.append(
            f"| {r['scaffold']} | {r['population']} | {r['candidates']} "
            f"| {_num(r['best'], '.6g')} | {_num(r['ndg'], '.2f')} | {r['llm_calls']} "
            f"| {_ratio(r['llm_calls'], ref and ref['llm_calls'])} | {r['tokens']} "
            f"| {r['wall_s']} | {_ratio(r['wall_s'], ref and ref['wall_s'])} "
            f"| {decisions or '-'} "
            f"| {f'{revised} revised, {failed} failed' if r['scaffold'] == 'evox' else '-'} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="sums_diffs", help="task name in tasks/ or a folder")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="local", help="local (embedded) or openai:<model>")
    parser.add_argument("--scaffolds", default="openevolve,top_k,best_of_n,evox")
    parser.add_argument("--evox-patience", type=int, default=1)
    parser.add_argument("--best-of-n", type=int, default=None, help="N of best_of_n")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/scaffolds/script")
    args = parser.parse_args(argv)
    args.task_dir = resolve_tasks([args.task], ROOT / "tasks")[0]
    names = [s.strip() for s in args.scaffolds.split(",") if s.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown scaffold(s) {unknown}; known: {', '.join(CONFIGS)}")
    if REFERENCE not in names:
        names.insert(0, REFERENCE)

    from evoduet_graph.llm import make_chat_model

    llm = make_chat_model(scaffold_config(REFERENCE, args).llm)  # one model for every run
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [run_scaffold(name, args, llm, args.out) for name in names]

    task = load_task(args.task_dir)
    text = (
        f"# Scaffolds on {task.name}: {args.iterations} iterations, seed {args.seed}, "
        f"model {args.model}\n\n"
        f"Reference of the ratios: the `{REFERENCE}` scaffold in the same invocation. "
        f"Initial {task.metric}: {_num(rows[0]['initial'], '.6g')}; NDG is floored at 0.\n\n"
        + table(rows, task.metric)
    )
    evox = next((r for r in rows if r["scaffold"] == "evox"), None)
    if evox is not None and evox["strategies"]:
        text += "\n## EvoX strategies\n\n"
        for s in evox["strategies"]:
            strat = s["strategy"] or {}
            prev = s.get("previous") or {}
            effect = (
                f" (replaced strategy {prev.get('id')}: best change {prev.get('best_delta')}, "
                f"{prev.get('new_bests')} new best(s))"
                if prev
                else ""
            )
            text += (
                f"- iteration {s['iteration']}: {s['status']} → strategy {strat.get('id')}, "
                f"rule `{strat.get('parent_rule')}`, instruction: "
                f"{strat.get('instruction') or '(none)'}{effect}\n"
            )
    text += (
        f"\nCommand: `{' '.join([Path(sys.executable).name, *sys.argv])}`; "
        f"python {platform.python_version()}, {platform.machine()}.\n"
    )
    (args.out / "summary.md").write_text(text, encoding="utf-8")
    (args.out / "summary.json").write_text(
        json.dumps(
            {"settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2
        ),
        encoding="utf-8",
    )
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
