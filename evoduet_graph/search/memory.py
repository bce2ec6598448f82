"""Long-term memory across runs of a task in a LangGraph ``BaseStore`` (``--memory PATH``).

Off by default: runs stay independent unless asked. With ``memory: PATH`` (CLI
``--memory PATH``) a run writes what D_search learned into a `SqliteStore` at PATH (any
``BaseStore`` through the Python API), namespaced by task:

* ``("evoduet", <task>, "documents")`` — every document of a credited retrieval (url, title,
  content, source), keyed by its normalised URL;
* ``("evoduet", <task>, "outcomes")`` — every realised outcome: the retrieval's query chain,
  knowledge state, final documents, the loop's predicted child scores (each for the record's
  parent, paper §3.4) and the impact (parent score, child score, Δ, outcome), keyed by run,
  record and iteration.

A new run with the same memory starts with those entries copied into its own D_search
(`TaskMemory.recall_into`): the documents get ids there (so the gate can name them for
``look-up``), and each earlier outcome becomes a record ``mem_000001`` … with its realised Δ,
which the gate and the query constructor see in their D_search selection like their own
records. The earlier runs' iterations are shown as iteration 0 and their parents as
``<run>/<program id>``; a recalled prediction stays with that parent, so it never speaks for a
parent of the new run. A deliberate addition to the paper, whose D_search lives for one run.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.sqlite import SqliteStore

from evoduet_graph.config import ConfigError
from evoduet_graph.search import database as records
from evoduet_graph.search.base import Document, normalize_url
from evoduet_graph.search.database import Impact, SearchDatabase

MEMORY_PREFIX = "mem_"
"""Record ids of outcomes recalled from memory (``mem_000001``)."""


def open_store(path: str | Path) -> SqliteStore:
    """The SQLite store at ``path`` (created with its tables when missing).

    Raises:
        ConfigError: the file cannot be created or is not a SQLite database (one line).
    """
    path = Path(path).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn)
        store.setup()
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(
            f"memory={str(path)!r} cannot be used as a memory store ({type(exc).__name__}: "
            f"{exc}); give a new file or one an earlier run with --memory wrote"
        ) from None
    return store


def run_tag(run_dir: Path | None) -> str:
    """A run's tag in the store: its directory name and a hash of its full path."""
    if run_dir is None:
        return "in-memory"
    return f"{run_dir.name}-{_key(str(Path(run_dir).resolve()))[:8]}"


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:24]


class TaskMemory:
    """The memory of one task inside a store (see the module docstring).

    Args:
        store: the LangGraph store.
        task: the task name (the namespace).
        run: this run's tag (keys its outcomes; e.g. the run directory's name).
    """

    def __init__(self, store: BaseStore, task: str, run: str) -> None:
        self.store = store
        self.task = task
        self.run = run
        self.documents_ns = ("evoduet", task, "documents")
        self.outcomes_ns = ("evoduet", task, "outcomes")

    # -- writing ---------------------------------------------------------------------------

    def remember(self, db: SearchDatabase, record_id: str, impact: Impact) -> None:
        """Store the record's documents and its realised ``impact``.

        Store the record's documents and its realised ``impact`` (records recalled from
        memory are not stored again).
        """
        if record_id.startswith(MEMORY_PREFIX):
            return
        record = db.get_record(record_id)
        if record is None:
            return
        ids = {r.doc_id for rnd in record.rounds for r in rnd.results} | set(record.final_doc_ids)
        docs = {}
        for doc_id in sorted(ids):
            doc = db.get_document(doc_id)
            if doc is None:
                continue
            docs[doc_id] = doc.url
            self.store.put(
                self.documents_ns,
                _key(normalize_url(doc.url)),
                {
                    "url": doc.url,
                    "title": doc.title,
                    "content": doc.content,
                    "source": doc.source,
                },
            )
        self.store.put(
            self.outcomes_ns,
            f"{self.run}:{record_id}:{impact.iteration}",
            {
                "run": self.run,
                "record": record.model_dump(mode="json", exclude={"impacts"}),
                "urls": docs,
                # the loop's hypothetical evidence scores, for the record's parent (§3.4)
                "predictions": [
                    p.model_dump(mode="json") for p in db.predictions(record_id=record_id)
                ],
                "impact": impact.model_dump(mode="json"),
            },
        )

    # -- reading ---------------------------------------------------------------------------

    def _all(self, namespace: tuple[str, ...]) -> list[Any]:
        items: list[Any] = []
        offset = 0
        while True:
            page = self.store.search(namespace, limit=100, offset=offset)
            items += page
            if len(page) < 100:
                return sorted(items, key=lambda i: (i.created_at, i.key))
            offset += 100

    def recall_into(self, db: SearchDatabase) -> int:
        """Copy the task's remembered documents and outcomes into an empty ``db``.

        Returns:
            The number of outcome records added (0 when ``db`` already has records).
        """
        if len(db):
            return 0
        docs = [i.value for i in self._all(self.documents_ns)]
        db.add_documents(
            [
                Document(
                    url=d["url"],
                    title=d.get("title", ""),
                    content=d.get("content", ""),
                    source=d.get("source", ""),
                )
                for d in docs
                if d.get("url") and d.get("content")
            ],
            0,
        )
        by_record: dict[tuple[str, str], list[Any]] = {}
        for item in self._all(self.outcomes_ns):
            value = item.value
            rid = (value.get("run", ""), value.get("record", {}).get("record_id", ""))
            by_record.setdefault(rid, []).append(value)
        added = 0
        for (run, _), values in by_record.items():
            added += 1
            self._add_record(db, f"{MEMORY_PREFIX}{added:06d}", run, values)
        return added

    @staticmethod
    def _add_record(db: SearchDatabase, record_id: str, run: str, values: list[Any]) -> None:
        first = values[0]
        old = first.get("record", {})
        urls: dict[str, str] = first.get("urls", {})

        def new_id(old_id: str) -> str | None:
            doc = db.document_by_url(urls.get(old_id, ""))
            return doc.doc_id if doc is not None else None

        rounds = []
        for rnd in old.get("rounds", []):
            results = [
                records.RoundResult(
                    doc_id=nid,
                    url=r.get("url", ""),
                    title=r.get("title", ""),
                    predicted_score=r.get("predicted_score"),
                )
                for r in rnd.get("results", [])
                if (nid := new_id(r.get("doc_id", ""))) is not None
            ]
            retained = [n for n in (new_id(i) for i in rnd.get("retained", [])) if n]
            rounds.append(
                records.RoundLog(
                    round=rnd.get("round", 0),
                    queries=rnd.get("queries", []),
                    results=results,
                    retained=retained,
                )
            )
        impacts = sorted(
            (Impact.model_validate(v["impact"]) for v in values), key=lambda i: i.iteration
        )
        db.add_record(
            records.SearchRecord(
                record_id=record_id,
                iteration=0,
                parent_id=f"{run}/{old.get('parent_id', '?')}",
                parent_score=float(old.get("parent_score", 0.0)),
                knowledge_state=old.get("knowledge_state") or {},
                rounds=rounds,
                final_doc_ids=[n for n in (new_id(i) for i in old.get("final_doc_ids", [])) if n],
                decision=old.get("decision", "retrieve"),
                impacts=[],
            )
        )
        for impact in impacts:
            db.add_impact(record_id, impact)
        for pred in first.get("predictions") or []:
            doc_id = new_id(str(pred.get("doc_id", "")))
            if doc_id is None:
                continue
            try:
                db.add_prediction(
                    records.Prediction(
                        record_id=record_id,
                        doc_id=doc_id,
                        iteration=0,
                        round=int(pred.get("round", 0)),
                        parent_id=f"{run}/{pred.get('parent_id', '?')}",
                        parent_score=float(pred["parent_score"]),
                        predicted_score=float(pred["predicted_score"]),
                    )
                )
            except (KeyError, TypeError, ValueError):  # a malformed stored line is skipped
                continue
