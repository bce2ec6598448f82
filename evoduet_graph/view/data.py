"""What ``evoduet view`` shows, read from run directories as JSON-ready dicts.

Everything is read, never written (docs/view.md): the event log and the prompt log through
`evoduet_graph.rundir.read` (a torn last line is skipped), D_search from a temporary copy
(`evoduet_graph.search.database.load_search_db`), the program store through a read-only SQLite
connection (`evoduet_graph.rundir.read.connect_readonly`), and the summary, series and
comparison rows through the report's own code (`evoduet_graph.report`). A missing file gives
an empty part and a notice, so a run that is still starting, was killed, or has no
``search_database.jsonl`` (the OpenEvolve baseline) shows what exists.

Each `RunSource` caches its answers under a *version* made of the sizes and modification
times of the run's files: the page polls ``/api/runs`` and fetches a part again only when the
version changed.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from evoduet_graph.errors import UserError
from evoduet_graph.report.compare import compare_row, run_label
from evoduet_graph.report.series import run_series
from evoduet_graph.report.summary import (
    gate_by_iteration,
    latest_by_iteration,
    node_costs,
    run_summary,
)
from evoduet_graph.report.summary_types import RunSummary
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.read import load_programs, read_json, read_jsonl
from evoduet_graph.rundir.store import ProgramRow
from evoduet_graph.rundir.usage import INCLUSIVE_NODES
from evoduet_graph.search.base import normalize_url
from evoduet_graph.search.database import SearchDatabase, load_search_db

__all__ = ["Catalogue", "RunSource", "ViewError", "is_bench_dir"]

_WATCHED = (
    layout.EVENTS,
    layout.PROGRAMS,
    layout.PROGRAMS + "-wal",
    layout.SEARCH_DB,
    layout.PROMPTS,
    layout.BEST_META,
    layout.RUN_META,
)
"""The files whose size and modification time make a run's version."""

_EXPECTED = {
    layout.EVENTS: "no events.jsonl yet: the run has not started, or this is not a run",
    layout.PROGRAMS: "no programs.sqlite yet: no program to show",
    layout.SEARCH_DB: (
        "no search_database.jsonl: this run never searched (e.g. --gate never), or has not yet"
    ),
    layout.PROMPTS: (
        "no prompts.jsonl yet: no generate call has finished (or the run was made by a version"
        " that did not log prompts)"
    ),
}


T = TypeVar("T")


_EVIDENCE_NODES = ("query_evolution", "retrieve", "look_up")
"""Nodes whose event lists the documents handed to ``generate`` (``documents``): the inner
loop (``query_evolution``; ``retrieve`` in older runs) and the look-up."""


class ViewError(UserError, ValueError):
    """A path given to ``evoduet view`` that is neither a run directory nor a bench folder."""


def is_run_dir(path: Path) -> bool:
    """True when ``path`` holds a run's marker files (``run.json`` or ``events.jsonl``)."""
    return any((path / name).is_file() for name in layout.MARKERS)


def is_bench_dir(path: Path) -> bool:
    """True when ``path`` is an ``evoduet bench`` output folder (its ``manifest.json``)."""
    return (path / "manifest.json").is_file() and (path / "runs").is_dir()


def bench_runs(path: Path) -> list[tuple[str, Path]]:
    """The graph runs of a bench folder: ``(task/method/seedK, run directory)``, sorted.

    The bench keeps each (task, method, seed) under ``runs/<task>/<method>/seed<k>/`` with the
    run directory of a graph method in its ``run/`` (`evoduet_graph.bench.graph_method`);
    OpenEvolve's own runs have no run directory of this package and are left out.
    """
    out = []
    for marker in sorted((path / "runs").glob("*/*/*/run/" + layout.RUN_META)):
        rdir = marker.parent
        out.append(("/".join(rdir.parent.relative_to(path / "runs").parts), rdir))
    return out


class Catalogue:
    """The runs shown for ``evoduet view PATH...``: run directories and bench folders' runs.

    A bench folder is read again at every `refresh` (the page's ``/api/runs``), so the runs a
    bench starts after the page opened appear too; runs keep their index (new ones are
    appended).

    Raises:
        ViewError: a path does not exist, or is neither a run directory nor a bench folder
            with runs (the message says which and what it expected).
    """

    def __init__(self, paths: list[Path]) -> None:
        self.sources: list[RunSource] = []
        self._benches: list[Path] = []
        self._known: set[Path] = set()
        self._used: set[str] = set()
        self._lock = threading.Lock()
        for path in paths:
            if not path.is_dir():
                raise ViewError(
                    f"{path} is not a directory: give a run directory or a bench folder"
                )
            if is_bench_dir(path):
                if not bench_runs(path):
                    raise ViewError(
                        f"{path} is a bench folder without a run directory of this package "
                        "under runs/<task>/<method>/seed<k>/run (OpenEvolve's runs cannot be "
                        "shown)"
                    )
                self._benches.append(path)
                self._add_bench(path)
            elif is_run_dir(path) or (path / layout.PROGRAMS).is_file():
                self._add(path, run_label(path.resolve(), self._used))
            else:
                raise ViewError(
                    f"{path} is neither a run directory (no {layout.RUN_META} or "
                    f"{layout.EVENTS}) nor a bench folder (no manifest.json and runs/)"
                )

    def _add(self, rdir: Path, label: str) -> None:
        self._known.add(rdir.resolve())
        self._used.add(label)
        self.sources.append(RunSource(rdir, label))

    def _add_bench(self, path: Path) -> None:
        for name, rdir in bench_runs(path):
            if rdir.resolve() not in self._known:
                self._add(rdir, name if name not in self._used else run_label(rdir, self._used))

    def refresh(self) -> list[RunSource]:
        """The runs, with any a bench folder gained since the last call appended."""
        with self._lock:
            for path in self._benches:
                self._add_bench(path)
            return list(self.sources)


class RunSource:
    """One run directory as the page sees it; every method reads, none writes.

    Args:
        path: the run directory.
        label: its name on the page (unique among the runs shown).
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = Path(path)
        self.label = label
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, Any]] = {}

    # -- versions and caching -------------------------------------------------------------
    def version(self) -> str:
        """Sizes and modification times of the run's files: changes whenever the run writes."""
        parts = []
        for name in _WATCHED:
            try:
                st = (self.path / name).stat()
            except OSError:
                parts.append("-")
                continue
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        return "/".join(parts)

    def _cached(self, key: str, build: Callable[[], T]) -> T:
        """``build()``, or its value kept from a call at the same `version`."""
        version = self.version()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == version:
                return cast(T, hit[1])
        value = build()
        with self._lock:
            self._cache[key] = (version, value)
        return value

    def _summary(self) -> RunSummary:
        return self._cached("summary", lambda: run_summary(self.path))

    def _events(self) -> tuple[list[dict[str, Any]], int]:
        return self._cached("events", lambda: read_jsonl(self.path / layout.EVENTS))

    def _programs(self) -> list[ProgramRow]:
        return self._cached("programs", lambda: load_programs(self.path / layout.PROGRAMS) or [])

    def _db(self) -> SearchDatabase | None:
        return self._cached("db", lambda: load_search_db(self.path / layout.SEARCH_DB))

    def _prompts(self) -> dict[str, list[dict[str, Any]]]:
        def build() -> dict[str, list[dict[str, Any]]]:
            # a generate node replayed after a resume logs its calls again, and its program
            # row is the replay's: the last record per (candidate, attempt) is the one shown
            records, _ = read_jsonl(self.path / layout.PROMPTS)
            last: dict[tuple[str, Any], dict[str, Any]] = {}
            for rec in records:
                last[(str(rec.get("candidate")), rec.get("attempt"))] = rec
            by_id: dict[str, list[dict[str, Any]]] = {}
            for (cid, _attempt), rec in sorted(last.items(), key=lambda kv: str(kv[0])):
                by_id.setdefault(cid, []).append(rec)
            return by_id

        return self._cached("prompts", build)

    # -- notices ----------------------------------------------------------------------------
    def notices(self) -> list[str]:
        """What the page should tell about this directory: missing files, torn lines, a live run."""
        out = [text for name, text in _EXPECTED.items() if not (self.path / name).is_file()]
        events, bad = self._events()
        if bad:
            out.append(
                f"{bad} line(s) of events.jsonl are not JSON objects (a torn last line while "
                "the run writes, or a killed run): skipped"
            )
        db = self._db()
        if db is not None and db.dropped_lines:
            out.append(f"{db.dropped_lines} line(s) of search_database.jsonl unreadable: skipped")
        if events and not self._finished(events):
            out.append("the run is still going (or was stopped without a run_end): live view")
        return out

    @staticmethod
    def _finished(events: list[dict[str, Any]]) -> bool:
        starts = [i for i, e in enumerate(events) if e.get("event") == "run_start"]
        last_start = starts[-1] if starts else -1
        return any(e.get("event") == "run_end" for e in events[last_start + 1 :])

    # -- the parts --------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        """``/api/runs`` entry: label, path, version, task, iterations, best, finished, notices."""
        summary = self._summary()
        events, _ = self._events()
        best = summary.best
        return {
            "label": self.label,
            "run_dir": str(self.path),
            "version": self.version(),
            "task": summary.task,
            "model": summary.model,
            "iterations": summary.iterations,
            "iterations_planned": summary.iterations_planned,
            "best_score": best.score if best else None,
            "ndg": best.ndg if best else None,
            "finished": self._finished(events),
            "notices": self.notices(),
        }

    def summary(self) -> dict[str, Any]:
        """The report's run summary (`RunSummary.to_dict`)."""
        return self._summary().to_dict()

    def programs(self) -> dict[str, Any]:
        """The evolution tree: one compact node per program, and the best program's lineage.

        A node: ``id``, ``parent``, ``iteration``, ``generation``, ``island`` (the ``select``
        event of its iteration), ``score``, ``status``, ``valid``, ``kind``, ``gate`` (the
        gate decision of the iteration that made it), ``error`` (its first line).
        ``best_lineage``: the best program's parent chain, oldest first.
        """

        def build() -> dict[str, Any]:
            events, _ = self._events()
            gates = {it: ev.get("gate_decision") for it, ev in gate_by_iteration(events).items()}
            islands = {
                it: ev.get("island") for it, ev in latest_by_iteration(events, "select").items()
            }
            rows = self._programs()
            nodes = []
            for row in rows:
                nodes.append(
                    {
                        "id": row.id,
                        "parent": row.parent_id,
                        "iteration": row.iteration,
                        "generation": row.generation,
                        "island": islands.get(row.iteration),
                        "score": row.score,
                        "status": row.status,
                        "valid": row.valid,
                        "kind": row.kind,
                        "gate": gates.get(row.iteration),
                        "error": (row.error or "").splitlines()[0][:200] if row.error else None,
                    }
                )
            return {"programs": nodes, "best_lineage": self._best_lineage(rows)}

        return self._cached("tree", build)

    def _best_lineage(self, rows: list[ProgramRow]) -> list[str]:
        by_id = {r.id: r for r in rows}
        meta = read_json(self.path / layout.BEST_META) or {}
        best = meta.get("id")
        if best not in by_id:
            valid = [r for r in rows if r.valid and r.score is not None]
            best = max(valid, key=lambda r: r.score or 0.0).id if valid else None
        chain: list[str] = []
        while best is not None and best in by_id and best not in chain:
            chain.append(best)
            best = by_id[best].parent_id
        return chain[::-1]

    def program(self, program_id: str) -> dict[str, Any]:
        """One program: code, unified diff to its parent, metrics, artifacts, error, prompts.

        ``prompts``: every ``generate`` call logged for it (``prompts.jsonl``; two when the
        novelty check asked again), each with its messages and reply.

        Raises:
            KeyError: no such program.
        """
        by_id = {r.id: r for r in self._programs()}
        row = by_id.get(program_id)
        if row is None:
            raise KeyError(program_id)
        parent = by_id.get(row.parent_id) if row.parent_id else None
        diff = None
        if parent is not None:
            diff = "".join(
                difflib.unified_diff(
                    (parent.code or "").splitlines(keepends=True),
                    (row.code or "").splitlines(keepends=True),
                    fromfile=f"{parent.id}",
                    tofile=f"{row.id}",
                )
            )
        events, _ = self._events()
        gate = gate_by_iteration(events).get(row.iteration, {})
        return {
            **row.model_dump(),
            "parent_score": parent.score if parent is not None else None,
            "diff": diff,
            "gate": gate.get("gate_decision"),
            "prompts": self._prompts().get(row.id, []),
        }

    def timeline(self) -> dict[str, Any]:
        """The knowledge timeline: one entry per iteration (see docs/view.md)."""
        return self._cached("timeline", self._build_timeline)

    def _build_timeline(self) -> dict[str, Any]:
        events, _ = self._events()
        db = self._db()
        its: dict[int, dict[str, Any]] = {}

        def at(it: Any) -> dict[str, Any] | None:
            if not isinstance(it, int) or it < 1:
                return None
            return its.setdefault(
                it,
                {
                    "iteration": it,
                    "gate": None,
                    "reasoning": None,
                    "knowledge_state": None,
                    "fallbacks": [],
                    "rounds": [],
                    "evidence": [],
                    "impacts": [],
                    "candidates": [],
                    "searches": [],
                },
            )

        seen_urls: set[str] = set()
        for ev in events:
            kind, entry = ev.get("event"), at(ev.get("iteration"))
            if entry is None:
                continue
            if kind == "gate_decision":
                entry.update(
                    gate=ev.get("decision"),
                    reasoning=ev.get("reasoning"),
                    knowledge_state=ev.get("knowledge_state"),
                )
            elif kind in (
                "gate_fallback",
                "gate_error",
                "gate_lookup_fallback",
                "query_fallback",
                "score_fallback",
                "score_error",
                "search_error",
                "retrieve_empty",
            ):
                entry["fallbacks"].append(kind)
            elif kind == "search":
                urls = [str(u) for u in ev.get("urls") or []]
                repeated = [u for u in urls if normalize_url(u) in seen_urls]
                seen_urls.update(normalize_url(u) for u in urls)
                entry["searches"].append(
                    {
                        "round": ev.get("round"),
                        "query": ev.get("query"),
                        "results": ev.get("results"),
                        "cached": ev.get("cached"),
                        "error": ev.get("error"),
                        "urls": urls,
                        "repeated_urls": repeated,
                    }
                )
            elif kind == "impact":
                entry["impacts"].append(
                    {
                        "record_id": ev.get("record_id"),
                        "delta": ev.get("delta"),
                        "outcome": ev.get("outcome"),
                        "predicted": ev.get("predicted"),
                        "realised": ev.get("realised"),
                        "doc_ids": ev.get("doc_ids"),
                    }
                )
            elif kind == "node" and ev.get("node") in _EVIDENCE_NODES and "error" not in ev:
                entry["evidence"] = [str(d) for d in ev.get("documents") or []]
            elif kind == "node" and ev.get("node") == "evaluate" and "error" not in ev:
                entry["candidates"] = [
                    {k: c.get(k) for k in ("id", "status", "score", "valid")}
                    for c in ev.get("candidates") or []
                    if isinstance(c, dict)
                ]
        gates = gate_by_iteration(events)
        for it, ev in gates.items():
            entry = at(it)
            if entry is not None and entry["gate"] is None:
                entry["gate"] = ev.get("gate_decision")
        self._add_records(its, db, seen_first=self._first_seen(events))
        return {"iterations": [its[k] for k in sorted(its)]}

    @staticmethod
    def _first_seen(events: list[dict[str, Any]]) -> dict[str, int]:
        """The first iteration whose search returned each normalised URL."""
        first: dict[str, int] = {}
        for ev in events:
            if ev.get("event") == "search" and isinstance(ev.get("iteration"), int):
                for url in ev.get("urls") or []:
                    first.setdefault(normalize_url(str(url)), ev["iteration"])
        return first

    @staticmethod
    def _add_records(
        its: dict[int, dict[str, Any]], db: SearchDatabase | None, seen_first: dict[str, int]
    ) -> None:
        """Fold D_search into the timeline: rounds, documents with predictions, evidence."""
        if db is None:
            return
        for record in db.records():
            entry = its.get(record.iteration)
            if entry is None:
                continue
            entry["record_id"] = record.record_id
            entry["decision"] = record.decision
            if record.knowledge_state and not entry["knowledge_state"]:
                entry["knowledge_state"] = record.knowledge_state
            entry["realised_delta"] = record.realised_delta
            entry["rounds"] = [
                {
                    "round": rnd.round,
                    "queries": list(rnd.queries),
                    "retained": list(rnd.retained),
                    "documents": [
                        {
                            **res.model_dump(),
                            "repeated": seen_first.get(normalize_url(res.url), record.iteration)
                            < record.iteration,
                        }
                        for res in rnd.results
                    ],
                }
                for rnd in record.rounds
            ]
        for entry in its.values():
            docs = []
            for doc_id in entry["evidence"]:
                doc = db.get_document(doc_id)
                if doc is not None:
                    docs.append(
                        {
                            "doc_id": doc.doc_id,
                            "url": doc.url,
                            "title": doc.title,
                            "source": doc.source,
                            "first_seen_iteration": doc.first_seen_iteration,
                            "excerpt": doc.content[:600],
                        }
                    )
                else:
                    docs.append({"doc_id": doc_id})
            entry["evidence"] = docs

    def curves(self) -> dict[str, Any]:
        """Best-so-far, NDG, predicted vs realised, and LLM calls / tokens / cost per node."""

        def build() -> dict[str, Any]:
            summary = self._summary()
            series = run_series(self.path, summary=summary)
            cost = summary.cost
            events, _ = self._events()
            usd = node_costs(events, self.path, cost)
            per_node = [
                {
                    "node": node,
                    "calls": usage.calls,
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "latency_s": usage.latency_s,
                    "usd": usd.get(node),
                    # its figures include other nodes' (the inner loop): not summed
                    "inclusive": node in INCLUSIVE_NODES,
                }
                for node, usage in summary.llm.by_node.items()
            ]
            return {
                "task": series["task"],
                "metric": series["metric"],
                "direction": series["direction"],
                "reference": series["reference"],
                "best": series["best"],
                "ndg": series["ndg"],
                "metric_values": series["metric_values"],
                "predictions": series["predictions"],
                "llm": per_node,
                "llm_usd": cost.llm_usd,
                "price_source": cost.price_source,
            }

        return self._cached("curves", build)

    def compare(self) -> dict[str, Any]:
        """This run's row of the comparison table and its best-so-far / NDG series."""

        def build() -> dict[str, Any]:
            summary = self._summary()
            curves = self.curves()
            return {
                "row": compare_row(self.path, self.label, summary),
                "best": curves["best"],
                "ndg": curves["ndg"],
            }

        return self._cached("compare", build)
