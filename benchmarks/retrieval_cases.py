"""What the documents did, iteration by iteration: the cases a reading of a bench quotes.

For every run directory of a bench folder whose method put documents into mutation prompts
(a retrieve or look-up of the gate, the oracle's fixed documents, a joint-level search), one
Markdown block per iteration with documents: the gate decision and the knowledge state it
wrote, the queries of each inner-loop round, the documents the prompt carried (title, URL,
predicted child score, where the inner loop scored them), the realised outcome (Δ of the best
valid child over its parent: the run's ``impact`` event for a retrieve or look-up, the same
measure from the program store for iterations that write none, the oracle's and the
joint-level search's) and the child's change as a diff against its parent. Then,
per run, the first iteration whose documents went with an improved child and the first whose
child was evaluated and did not improve: the "one retrieval that changed a child and one that
did not" of the bench's reading. Each run's section opens with its gate decisions counted; a
run whose gate never put documents into a prompt gets a section that says so. From the
repository root::

    .venv/bin/python benchmarks/retrieval_cases.py <bench-out> [--methods evoduet,joint-search]
        [--tasks lennard_jones_10] [--max-diff-lines 30] > cases.md

Reads the run directories only (``events.jsonl``, ``search_database.jsonl``,
``programs.sqlite``); a running run is read as far as it got.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evoduet_graph.candidates.diffs import code_diff_summary
from evoduet_graph.rundir.read import iter_jsonl, load_programs


def _one_line(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "n/a"


_PROMPT_NODES = ("gate", "look_up", "query_evolution", "retrieve")
"""Nodes whose event names the documents the mutation prompt carried (``retrieve``: the
query-evolution node's name in runs made before it was renamed)."""


def _documents_by_iteration(events: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """Per iteration, the documents its mutation prompt carried: ``{doc_id: where from}``.

    From the gate, look-up and query-evolution nodes' events (a retrieve or look-up, the
    oracle's fixed documents) and the ``joint_search`` events (a joint-level search; "where
    from" names the candidate, since each candidate's prompt carried its own).
    """
    docs: dict[int, dict[str, str]] = defaultdict(dict)
    for e in events:
        it = e.get("iteration")
        if not isinstance(it, int):
            continue
        if e.get("event") == "node" and e.get("node") in _PROMPT_NODES:
            for doc_id in e.get("documents") or []:
                docs[it].setdefault(str(doc_id), "")
        elif e.get("event") == "joint_search":
            for doc_id in e.get("doc_ids") or []:
                docs[it].setdefault(str(doc_id), f"candidate {e.get('candidate_index')}")
        elif e.get("event") == "impact":
            for doc_id in e.get("doc_ids") or []:
                docs[it].setdefault(str(doc_id), "")
    return {it: found for it, found in docs.items() if found}


def _outcome(run: dict[str, Any], iteration: int) -> tuple[str, float | None]:
    """The iteration's realised outcome and Δ.

    The run's ``impact`` event where it wrote one (a retrieve or look-up), else the same
    measure from the program store: the best valid child's score against its parent's
    (improved, unchanged or decreased; invalid when no child was valid, not evaluated when
    none reached the evaluator).
    """
    impact = run["impacts"].get(iteration)
    if impact is not None:
        return str(impact.get("outcome")), impact.get("delta")
    children = run["children"].get(iteration, [])
    valid = [c for c in children if c.valid and c.score is not None]
    if not valid:
        evaluated = any(c.status == "evaluated" for c in children)
        return ("invalid" if evaluated else "not_evaluated"), None
    best = max(valid, key=lambda c: c.score)
    parent = run["programs"].get(best.parent_id or "")
    if parent is None or parent.score is None:
        return "n/a", None
    delta = float(best.score) - float(parent.score)
    return ("improved" if delta > 0 else "decreased" if delta < 0 else "unchanged"), delta


def _read_run(run_dir: Path) -> dict[str, Any]:
    """The run's gate decisions, impacts, queries, prompt documents, documents and programs."""
    events = list(iter_jsonl(run_dir / "events.jsonl"))
    queries: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for e in events:
        if e.get("event") == "search" and e.get("query"):
            queries[e["iteration"]].append((int(e.get("round") or 0), str(e["query"])))
    programs = {p.id: p for p in load_programs(run_dir / "programs.sqlite") or []}
    children: dict[int, list[Any]] = defaultdict(list)
    for p in sorted(programs.values(), key=lambda p: p.id):
        if p.iteration > 0:
            children[p.iteration].append(p)
    return {
        "decisions": {e["iteration"]: e for e in events if e.get("event") == "gate_decision"},
        "lookup_fallbacks": {
            e["iteration"] for e in events if e.get("event") == "gate_lookup_fallback"
        },
        "gate_nodes": {
            e["iteration"]: e
            for e in events
            if e.get("event") == "node" and e.get("node") == "gate" and "iteration" in e
        },
        "impacts": {e["iteration"]: e for e in events if e.get("event") == "impact"},
        "in_prompt": _documents_by_iteration(events),
        "queries": queries,
        "docs": {
            str(row.get("doc_id")): row
            for row in iter_jsonl(run_dir / "search_database.jsonl")
            if row.get("type") == "document"
        },
        "programs": programs,
        "children": children,
    }


def _block(run: dict[str, Any], iteration: int, max_diff_lines: int) -> str:
    """One iteration with documents as Markdown (see the module docstring)."""
    impact = run["impacts"].get(iteration, {})
    decision = run["decisions"].get(iteration, {})
    outcome, delta = _outcome(run, iteration)
    gate = run["gate_nodes"].get(iteration, {})
    label = decision.get("decision") or (
        f"{gate.get('gate_decision')} ({_one_line(gate.get('gate_reason'), 80)})"
        if gate.get("gate_decision")
        else "documents"
    )
    lines = [
        f"#### iteration {iteration}: {label}, outcome {outcome} (Δ {_fmt(delta)})",
        "",
    ]
    state = decision.get("knowledge_state") or {}
    lines += [
        f"- knowledge state, {key}: {_one_line(state[key])}"
        for key in ("known", "established", "unresolved")
        if state.get(key)
    ]
    lines += [
        f"- query, round {rnd}: “{_one_line(query, 200)}”"
        for rnd, query in run["queries"].get(iteration, [])
    ]
    predicted = dict(zip(impact.get("doc_ids") or [], impact.get("predicted") or [], strict=False))
    for doc_id, where in run["in_prompt"][iteration].items():
        doc = run["docs"].get(doc_id, {})
        line = f"- document {doc_id}: {_one_line(doc.get('title'), 120)} ({doc.get('url', '?')})"
        line += f", predicted {_fmt(predicted[doc_id])}" if doc_id in predicted else ""
        lines.append(line + (f", {where}" if where else ""))
    for child in run["children"].get(iteration, []):
        parent = run["programs"].get(child.parent_id or "")
        head = f"- child {child.id} of {child.parent_id}: {child.status}"
        head += f", score {_fmt(child.score)}" if child.valid else ""
        head += f", {_one_line(child.error, 160)}" if child.error else ""
        lines.append(head)
        if child.code and parent is not None and parent.code:
            diff = code_diff_summary(parent.code, child.code, max_lines=max_diff_lines)
            lines += ["", "```diff", diff.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def run_cases(run_dir: Path, max_diff_lines: int) -> tuple[list[str], dict[str, int]]:
    """Markdown blocks of ``run_dir``'s iterations with documents, and the picked cases.

    Returns:
        The blocks (one per iteration with documents, in order) and ``{"improved": i,
        "not improved": j}``: the iterations picked as the run's two cases (absent when none).
    """
    return _cases(_read_run(run_dir), max_diff_lines)


def _cases(run: dict[str, Any], max_diff_lines: int) -> tuple[list[str], dict[str, int]]:
    blocks: list[str] = []
    picked: dict[str, int] = {}
    for iteration in sorted(run["in_prompt"]):
        blocks.append(_block(run, iteration, max_diff_lines))
        outcome, _ = _outcome(run, iteration)
        if outcome == "improved":
            picked.setdefault("improved", iteration)
        elif outcome in ("unchanged", "decreased"):
            picked.setdefault("not improved", iteration)
    return blocks, picked


def gate_tally(run: dict[str, Any]) -> str:
    """The run's gate decisions counted, e.g. ``no-op 11, retrieve 2, look-up 2``.

    One per iteration (the last, as the report counts them: a resumed run may have decided an
    iteration twice), with the look-ups that fell back to no-op for want of stored documents;
    empty for a run with no gate decision (the baseline, the oracle).
    """
    counts = Counter(str(e.get("decision")) for e in run["decisions"].values())
    tally = ", ".join(f"{d} {n}" for d, n in counts.most_common())
    if run["lookup_fallbacks"]:
        tally += (
            f" (of the no-ops, {len(run['lookup_fallbacks'])} a look-up with nothing stored to"
            " look up)"
        )
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", type=Path, help="a bench output folder (holds runs/)")
    parser.add_argument("--methods", default="", help="comma-separated; default: all")
    parser.add_argument("--tasks", default="", help="comma-separated; default: all")
    parser.add_argument("--max-diff-lines", type=int, default=30)
    args = parser.parse_args(argv)
    methods = {m for m in args.methods.split(",") if m}
    tasks = {t for t in args.tasks.split(",") if t}
    runs = sorted((args.bench / "runs").glob("*/*/seed*/run"))
    if not runs:
        print(f"error: no run directories under {args.bench / 'runs'}", file=sys.stderr)
        return 2
    for run_dir in runs:
        task, method, seed = run_dir.parts[-4:-1]
        if (methods and method not in methods) or (tasks and task not in tasks):
            continue
        run = _read_run(run_dir)
        blocks, picked = _cases(run, args.max_diff_lines)
        tally = gate_tally(run)
        if not blocks and not tally:
            continue
        header = f"## {task} / {method} / {seed}\n\n" + (
            f"Gate decisions: {tally}.\n\n" if tally else ""
        )
        if not blocks:
            print(header + "No iteration's mutation prompt carried documents.\n")
            continue
        chosen = ", ".join(f"{k}: iteration {v}" for k, v in picked.items()) or "none"
        print(f"{header}Cases: {chosen}.\n")
        print("\n".join(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
