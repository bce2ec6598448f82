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
run whose gate never put documents into a prompt gets a section that says so, and so does a
run whose events log is missing or holds no readable event. Events that cannot be read (a torn
line, a field of the wrong type) are left out and counted, and an unreadable program store is
named once in its run's section (its children and diffs left out). From the repository root::

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
from evoduet_graph.rundir.events import check_event
from evoduet_graph.rundir.read import iter_jsonl, load_programs, read_jsonl


def _one_line(text: Any, limit: int = 300) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) else "n/a"


_PROMPT_NODES = ("gate", "look_up", "query_evolution", "retrieve")
"""Nodes whose event names the documents the mutation prompt carried (``retrieve``: the
query-evolution node's name in runs made before it was renamed)."""


def _readable(event: dict[str, Any]) -> bool:
    """Whether an event this script reads has its fields' types right.

    The event catalogue's check (`check_event`: ``round`` an int, ``iteration`` an int or
    None, ...), and the document ids a prompt node or an impact names: a list of ids (no list
    or object among them).
    """
    kind = event.get("event")
    read = kind in ("search", "gate_decision", "gate_lookup_fallback", "impact", "joint_search")
    if not read and (kind != "node" or event.get("node") not in _PROMPT_NODES):
        return True  # not read here
    try:
        check_event(str(kind), event)
    except ValueError:
        return False
    ids = [event[k] for k in ("documents", "doc_ids") if event.get(k) is not None]
    return all(isinstance(v, list) and not any(isinstance(i, list | dict) for i in v) for v in ids)


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
    if run["store_problem"]:
        return "n/a", None
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
    """The run's gate decisions, impacts, queries, prompt documents, documents and programs.

    Also what could not be read: ``events_problem`` (a sentence: the events log is missing or
    holds no readable event; else None), ``unreadable_events`` (torn lines and events with a
    field of the wrong type, left out) and ``store_problem`` (why ``programs.sqlite`` cannot
    be read; else None).
    """
    events_path = run_dir / "events.jsonl"
    events_problem = None
    try:
        lines, torn = read_jsonl(events_path)
    except OSError as exc:
        lines, torn = [], 0
        events_problem = f"Its events log (events.jsonl) cannot be read ({exc.strerror or exc})"
    events = [e for e in lines if _readable(e)]
    unreadable = torn + len(lines) - len(events)
    if events_problem is None and not events:
        events_problem = "Its events log (events.jsonl) is empty"
        if not events_path.is_file():
            events_problem = "No events log (events.jsonl)"
        elif unreadable:
            events_problem = (
                f"Its events log (events.jsonl) holds no readable event ({unreadable} unreadable)"
            )
    queries: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for e in events:
        if e.get("event") == "search" and e.get("query") and isinstance(e.get("iteration"), int):
            queries[e["iteration"]].append((int(e.get("round") or 0), str(e["query"])))
    store = run_dir / "programs.sqlite"
    loaded = load_programs(store)
    store_problem = None
    if loaded is None:
        store_problem = "no programs.sqlite" if not store.is_file() else "not a program store"
    programs = {p.id: p for p in loaded or []}
    children: dict[int, list[Any]] = defaultdict(list)
    for p in sorted(programs.values(), key=lambda p: p.id):
        if p.iteration > 0:
            children[p.iteration].append(p)
    return {
        "decisions": {e["iteration"]: e for e in events if e.get("event") == "gate_decision"},
        "lookup_fallbacks": {
            e.get("iteration") for e in events if e.get("event") == "gate_lookup_fallback"
        },
        "gate_nodes": {
            e["iteration"]: e
            for e in events
            if e.get("event") == "node" and e.get("node") == "gate" and "iteration" in e
        },
        "impacts": {e.get("iteration"): e for e in events if e.get("event") == "impact"},
        "in_prompt": _documents_by_iteration(events),
        "queries": queries,
        "docs": {
            str(row.get("doc_id")): row
            for row in iter_jsonl(run_dir / "search_database.jsonl")
            if row.get("type") == "document"
        },
        "programs": programs,
        "children": children,
        "events_problem": events_problem,
        "unreadable_events": unreadable,
        "store_problem": store_problem,
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
    if args.max_diff_lines < 1:
        parser.error(f"--max-diff-lines must be at least 1, not {args.max_diff_lines}")
    methods = {m for m in args.methods.split(",") if m}
    tasks = {t for t in args.tasks.split(",") if t}
    runs = sorted((args.bench / "runs").glob("*/*/seed*/run"))
    if not runs:
        print(f"error: no run directories under {args.bench / 'runs'}", file=sys.stderr)
        return 2
    for what, asked, index in (("method", methods, -3), ("task", tasks, -4)):
        present = {r.parts[index] for r in runs}
        if unknown := sorted(asked - present):
            print(
                f"error: no run directories of {what}(s) {', '.join(unknown)} under "
                f"{args.bench / 'runs'}; {what}s there: {', '.join(sorted(present))}",
                file=sys.stderr,
            )
            return 2
    for run_dir in runs:
        task, method, seed = run_dir.parts[-4:-1]
        if (methods and method not in methods) or (tasks and task not in tasks):
            continue
        run = _read_run(run_dir)
        header = f"## {task} / {method} / {seed}\n\n"
        if run["events_problem"]:
            print(f"{header}{run['events_problem']}: nothing of this run to read.\n")
            continue
        blocks, picked = _cases(run, args.max_diff_lines)
        tally = gate_tally(run)
        if not blocks and not tally and not run["unreadable_events"]:
            continue
        header += f"Gate decisions: {tally}.\n\n" if tally else ""
        if run["unreadable_events"]:
            header += (
                f"Unreadable events left out: {run['unreadable_events']} (a torn line, or a "
                "field of the wrong type).\n\n"
            )
        if not blocks:
            print(header + "No iteration's mutation prompt carried documents.\n")
            continue
        if run["store_problem"]:
            header += (
                f"Program store unreadable ({run['store_problem']}): children and diffs left "
                "out, outcomes without an impact event n/a.\n\n"
            )
        chosen = ", ".join(f"{k}: iteration {v}" for k, v in picked.items()) or "none"
        print(f"{header}Cases: {chosen}.\n")
        print("\n".join(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
