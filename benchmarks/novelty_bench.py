"""Novelty rejection: what a check costs, and how similar real children are to their parents.

Two reports (`evoduet_graph.candidates.novelty`):

``cost`` (default) — wall time of `NoveltyChecker.check` against 1 … 1,000 reference programs
(circle_packing_26-sized programs, each a few edits from the last), cold (every reference
tokenised for the first time) and warm (normalised codes cached, as in a run where the
population changes by one program an iteration), and the same with a LangChain `Embeddings`
when ``--embeddings`` names one. The reference measured in the same process is one sandboxed
evaluation of the smoke task's initial program (the cheapest evaluation of any bundled task —
what a rejection saves at the least); the ratio is check time / evaluation time.

``similarity RUN_DIR ...`` — for every child in the run directories' program stores: its
token similarity to its parent, whether it is an exact normalised duplicate, whether it beat
its parent (a (child, parent) pair seen in several directories counts once); then, per
threshold, how many children ``novelty.max_similarity`` would have
rejected and how many of those were improvements. With ``--embeddings`` the cosine similarity
(chunked, as the checker computes it) is reported too. This is the evidence behind the
defaults in `evoduet_graph.config.NoveltyConfig`.

Run (package installed, or with ``PYTHONPATH=.``)::

    .venv/bin/python benchmarks/novelty_bench.py cost [--sizes 1 10 100 1000] [--embeddings minilm]
    .venv/bin/python benchmarks/novelty_bench.py similarity runs/* [--embeddings minilm]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph.candidates.novelty import (
    NoveltyChecker,
    load_embeddings,
    normalise,
    token_similarity,
)
from evoduet_graph.config import NoveltyConfig

THRESHOLDS = (0.9, 0.95, 0.97, 0.98, 0.99, 0.995, 0.999, 1.0)


def _programs(count: int, seed: int = 0) -> list[str]:
    """``count`` programs, each a few edits away from the previous one.

    ``count`` programs: circle_packing_26's initial program, then each one a few random
    constant edits and an inserted line away from the previous one.
    """
    rng = random.Random(seed)
    base = (ROOT / "tasks" / "circle_packing_26" / "initial_program.py").read_text()
    lines = base.splitlines()
    out = []
    for i in range(count):
        for _ in range(2):
            j = rng.randrange(len(lines))
            if "=" in lines[j] and not lines[j].lstrip().startswith("#"):
                lines[j] = lines[j] + f" + {rng.random():.4f} * 0"
        indent = next((ln[: len(ln) - len(ln.lstrip())] for ln in lines if ln.startswith(" ")), "")
        lines.insert(rng.randrange(1, len(lines)), f"{indent}# variant {i}")
        out.append("\n".join(lines) + "\n")
    return out


def _evaluation_seconds(repeats: int = 3) -> float:
    from evoduet_graph.config import EvaluationConfig
    from evoduet_graph.evaluation import SandboxEvaluator
    from evoduet_graph.task import load_task

    task = load_task(ROOT / "tasks" / "smoke_polygon_area")
    evaluator = SandboxEvaluator.from_config(task, EvaluationConfig())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        outcome = evaluator.evaluate(task.initial_program, "bench")
        times.append(time.perf_counter() - start)
        if not outcome.valid:
            raise RuntimeError(f"the reference evaluation failed: {outcome.error}")
    return statistics.median(times)


def cost(sizes: list[int], embeddings_spec: str | None) -> dict[str, Any]:
    evaluation_s = _evaluation_seconds()
    programs = _programs(max(sizes) + 1)
    candidate = programs[-1].replace("# variant", "# changed variant", 1) + "x_new = 1\n"
    tokens = statistics.median(len(normalise(p).tokens) for p in programs[:50])
    rows = []
    specs: list[str | None] = [None] + ([embeddings_spec] if embeddings_spec else [])
    for spec in specs:
        embeddings = load_embeddings(spec) if spec else None
        for n in sizes:
            refs = [(f"p{i}", programs[i]) for i in range(n)]
            cfg = NoveltyConfig(max_compared=n, max_cosine=0.999999)
            checker = NoveltyChecker(cfg, embeddings)
            start = time.perf_counter()
            verdict = checker.check(candidate, refs)
            cold = time.perf_counter() - start
            warm_times = []
            for k in range(5):  # one new candidate a check, references cached
                start = time.perf_counter()
                checker.check(candidate + f"y_{k} = {k}\n", refs)
                warm_times.append(time.perf_counter() - start)
            warm = statistics.median(warm_times)
            rows.append(
                {
                    "embeddings": spec,
                    "references": n,
                    "cold_ms": round(cold * 1000, 2),
                    "warm_ms": round(warm * 1000, 3),
                    "warm_vs_evaluation": round(warm / evaluation_s, 5),
                    "verdict": verdict.kind or "novel",
                }
            )
    return {
        "reference": {"smoke_evaluation_s": round(evaluation_s, 4)},
        "program_tokens_median": tokens,
        "rows": rows,
    }


def similarity(run_dirs: list[Path], embeddings_spec: str | None) -> dict[str, Any]:
    from evoduet_graph.rundir.store import ProgramStore

    checker = None
    if embeddings_spec:
        checker = NoveltyChecker(NoveltyConfig(), load_embeddings(embeddings_spec))
    children = []
    seen: set[tuple[str, str]] = set()
    for rdir in run_dirs:
        path = rdir / "programs.sqlite"
        if not path.is_file():
            continue
        try:
            store = ProgramStore(path)
        except sqlite3.DatabaseError as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            continue
        try:
            rows = {r.id: r for r in store.all_programs()}
        finally:
            store.close()
        for row in rows.values():
            parent = rows.get(row.parent_id or "")
            if row.kind == "initial" or row.code is None or parent is None or not parent.code:
                continue
            a, b = normalise(row.code), normalise(parent.code)
            if (a.sha, b.sha) in seen:  # copies of a run directory count once
                continue
            seen.add((a.sha, b.sha))
            exact = a.sha == b.sha
            sim = 1.0 if exact else token_similarity(a, b)
            improved = bool(
                row.valid
                and parent.score is not None
                and row.score is not None
                and row.score > parent.score
            )
            child: dict[str, Any] = {
                "run": rdir.name,
                "id": row.id,
                "token_similarity": round(sim, 4),
                "exact": exact,
                "valid": row.valid,
                "improved": improved,
            }
            if checker is not None:
                va, vb = checker._embed([a, b])
                child["cosine"] = round(float(va @ vb), 5)
            children.append(child)
    table = []
    for t in THRESHOLDS:
        hit = [c for c in children if c["token_similarity"] >= t]
        table.append(
            {
                "max_similarity": t,
                "rejected": len(hit),
                "of_which_valid": sum(c["valid"] for c in hit),
                "of_which_improved": sum(c["improved"] for c in hit),
            }
        )
    return {
        "runs": len(run_dirs),
        "children": len(children),
        "exact_duplicates": sum(c["exact"] for c in children),
        "improved": sum(c["improved"] for c in children),
        "improved_children": [c for c in children if c["improved"]],
        "thresholds": table,
        "children_detail": children,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["cost", "similarity"], default="cost")
    parser.add_argument("run_dirs", nargs="*", type=Path)
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 10, 100, 200, 1000])
    parser.add_argument("--embeddings", default=None, help="e.g. minilm (needs the extra)")
    args = parser.parse_args(argv)
    if args.mode == "cost":
        result = cost(args.sizes, args.embeddings)
        print(
            f"reference: one sandboxed smoke evaluation = "
            f"{result['reference']['smoke_evaluation_s'] * 1000:.0f} ms; "
            f"program size (median normalised tokens) = {result['program_tokens_median']}"
        )
        print(f"{'embeddings':>10} {'refs':>6} {'cold ms':>9} {'warm ms':>9} {'warm/eval':>10}")
        for r in result["rows"]:
            print(
                f"{r['embeddings']!s:>10} {r['references']:>6} {r['cold_ms']:>9.2f} "
                f"{r['warm_ms']:>9.3f} {r['warm_vs_evaluation']:>10.5f}"
            )
    else:
        if not args.run_dirs:
            parser.error("similarity needs run directories")
        result = similarity(args.run_dirs, args.embeddings)
        print(
            f"{result['children']} children in {result['runs']} run(s); "
            f"{result['exact_duplicates']} exact normalised duplicates of their parent; "
            f"{result['improved']} beat their parent"
        )
        for c in result["improved_children"]:
            print(
                f"  improved: {c['run']}/{c['id']} token similarity {c['token_similarity']}"
                + (f", cosine {c['cosine']}" if "cosine" in c else "")
            )
        print(f"{'max_similarity':>15} {'rejected':>9} {'valid':>6} {'improved':>9}")
        for r in result["thresholds"]:
            print(
                f"{r['max_similarity']:>15} {r['rejected']:>9} {r['of_which_valid']:>6} "
                f"{r['of_which_improved']:>9}"
            )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
