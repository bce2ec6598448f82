"""The search database D_search (docs/design.md §1; paper §3.3-3.4).

Every committed retrieval — the query chain, each round's results with predicted scores, the
final documents — every prediction of the inner loops, and every realised outcome (impact:
iteration, parent score, child score, Δ, improved/decreased/unchanged/invalid/not_evaluated)
is kept here and persisted to an append-only JSONL file, ``<run_dir>/search_database.jsonl``.
Each line is one JSON object with a ``type``:

* ``document`` — a `StoredDocument` (full text; a document has no score of its own);
* ``prediction`` — a `Prediction`: the child score predicted for one document *within one
  inner loop, for that loop's parent* (paper §3.4: a document is scored once per inner loop
  and the score is reused in that loop's later rounds only; a document found again by a later
  loop, under another parent, is scored again and gets a second prediction);
* ``record`` — a `SearchRecord` (impacts it already carries included);
* ``impact`` — ``{"record_id", **Impact}``.

Appends are idempotent (a resumed run may re-execute the node that wrote them): a document
with a known normalised URL keeps its id and is not rewritten, a record with a known
``record_id`` is ignored, an impact for a known ``(record_id, iteration)`` is ignored, and a
prediction for a known ``(record_id, doc_id)`` is ignored. A torn last line (a process killed
mid-write) is dropped on load, counted in `SearchDatabase.dropped_lines`, and cut from the file
so later appends start on a clean line. ``score`` lines of files written before predictions
belonged to a loop (one run-wide score per document, parent unknown) are read and ignored;
they are counted in `SearchDatabase.legacy_score_lines`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoduet_graph.prompts.untrusted import one_line
from evoduet_graph.search.base import Document, normalize_url

logger = logging.getLogger(__name__)

SelectPolicy = Literal["delta", "relevance_novelty", "recency", "full"]
Outcome = Literal["improved", "decreased", "unchanged", "invalid", "not_evaluated"]


def _rerank_assessment(record: SearchRecord) -> tuple[float, float] | None:
    """Mean (relevance, novelty) of the record's final documents.

    Mean (relevance, novelty) of the record's final documents as the listwise reranker
    rated them (the latest round that rated each), or None when none was rated.
    """
    ratings: dict[str, tuple[float, float]] = {}
    for rnd in record.rounds:
        for result in rnd.results:
            if result.relevance is not None and result.novelty is not None:
                ratings[result.doc_id] = (result.relevance, result.novelty)
    mine = [ratings[d] for d in record.final_doc_ids if d in ratings]
    if not mine:
        return None
    return (sum(r for r, _ in mine) / len(mine), sum(n for _, n in mine) / len(mine))


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RoundResult(_Model):
    """One search hit of an inner-loop round, as shown to the LLM.

    Attributes:
        doc_id: the stored document id (``doc_000001``).
        url: the hit's URL (offline: its id).
        title: its title.
        predicted_score: the hypothetical child score predicted for it (task scale), or None.
        relevance / novelty: the listwise reranker's ratings (0..1), or None.
    """

    doc_id: str
    url: str
    title: str = ""
    predicted_score: float | None = None
    relevance: float | None = None
    novelty: float | None = None


class RoundLog(_Model):
    """One inner-loop round: the queries issued, the results, the documents retained."""

    round: int
    queries: list[str] = Field(default_factory=list)
    results: list[RoundResult] = Field(default_factory=list)
    retained: list[str] = Field(default_factory=list, description="doc ids kept (top-K)")


class Impact(_Model):
    """A realised outcome of a record's documents in one outer iteration.

    Attributes:
        iteration: the outer iteration whose child used the documents.
        parent_score: the parent's fitness.
        child_score: the best valid child's fitness, or None (no valid child).
        delta: ``child_score - parent_score`` on the fitness scale (higher is better), or None.
        outcome: improved / decreased / unchanged; ``invalid`` (children were evaluated and
            every one was rejected by the evaluator: no Δ, since an invalid program has no
            score on the task's scale); ``not_evaluated`` (no child reached the evaluator:
            the model failed, the diff did not apply, or every child was a duplicate).
    """

    iteration: int
    parent_score: float
    child_score: float | None = None
    delta: float | None = None
    outcome: Outcome = "not_evaluated"


class SearchRecord(_Model):
    """One committed retrieval (or look-up) of the outer loop.

    Attributes:
        record_id: ``ret_000001`` (use `SearchDatabase.record_id_for` for replay-stable ids).
        iteration: the outer iteration that made it.
        parent_id: the parent program id.
        parent_score: the parent's fitness.
        knowledge_state: the gate's / inner loop's final knowledge state.
        rounds: the inner-loop rounds (empty for a look-up).
        final_doc_ids: the documents handed to the outer loop.
        decision: ``retrieve`` or ``look-up``; ``grounding`` (the seed written before
            iteration 1) or ``joint-search`` (the searches of one mutation call).
        impacts: realised outcomes (appended by `SearchDatabase.add_impact`).
    """

    record_id: str
    iteration: int
    parent_id: str
    parent_score: float
    knowledge_state: dict[str, Any] = Field(default_factory=dict)
    rounds: list[RoundLog] = Field(default_factory=list)
    final_doc_ids: list[str] = Field(default_factory=list)
    decision: Literal["retrieve", "look-up", "grounding", "joint-search"] = "retrieve"
    impacts: list[Impact] = Field(default_factory=list)

    @property
    def queries(self) -> list[str]:
        """All queries of the record, in round order."""
        return [q for r in self.rounds for q in r.queries]

    @property
    def realised_delta(self) -> float | None:
        """Mean realised Δ over impacts that have one; None when there is none."""
        deltas = [i.delta for i in self.impacts if i.delta is not None]
        return sum(deltas) / len(deltas) if deltas else None


class Prediction(_Model):
    """One hypothetical evidence score (paper §3.4).

    The child score predicted for a document by one inner loop, for that loop's parent.

    Attributes:
        record_id: the retrieval record of the inner loop (``ret_000012``).
        doc_id: the scored document.
        iteration: the outer iteration the loop served.
        round: the inner round (0-based) that scored it.
        parent_id / parent_score: the parent the prediction is for (fitness scale).
        predicted_score: the predicted child score (task's higher-is-better scale).
        knowledge_state: the knowledge state the scoring reply returned with it (the round's
            ``pending_knowledge``), so a loop re-run after a kill recovers it with the scores
            instead of continuing from an older state; None: the reply carried none.
    """

    record_id: str
    doc_id: str
    iteration: int
    round: int
    parent_id: str
    parent_score: float
    predicted_score: float
    knowledge_state: dict[str, str] | None = None


class StoredDocument(_Model):
    """A document in D_search with a stable id (its predictions are `Prediction` lines).

    Attributes:
        doc_id: ``doc_000001``; the same normalised URL always maps to the same id.
        url, title, content, source: as returned by the backend (content already capped).
        first_seen_iteration: the outer iteration that first stored it.
    """

    doc_id: str
    url: str
    title: str = ""
    content: str = ""
    source: str = ""
    first_seen_iteration: int = 0

    @property
    def normalized_url(self) -> str:
        """`normalize_url` of the document's URL (the de-duplication key)."""
        return normalize_url(self.url)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def _signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.6g}"


class SearchDatabase:
    """D_search: documents, retrieval records and impacts, persisted as JSONL.

    Args:
        path: the JSONL file (``<run_dir>/search_database.jsonl``), created on first write;
            None keeps everything in memory.
        fsync: fsync after each append (durability across power loss; ~ms per write).

    Attributes:
        dropped_lines: unparseable lines skipped on load (a torn last line included).
        legacy_score_lines: run-wide ``score`` lines of an older file, read and ignored.

    All methods are thread-safe.
    """

    def __init__(self, path: str | Path | None = None, *, fsync: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.fsync = fsync
        self.dropped_lines = 0
        self.legacy_score_lines = 0
        self._lock = threading.RLock()
        self._docs: dict[str, StoredDocument] = {}
        self._by_url: dict[str, str] = {}
        self._records: dict[str, SearchRecord] = {}
        self._predictions: dict[tuple[str, str], Prediction] = {}
        if self.path is not None and self.path.exists():
            self._restore()

    # -- persistence -----------------------------------------------------------------------

    def _restore(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        offset = 0
        good_end = 0
        for n, raw in enumerate(lines):
            is_last = n == len(lines) - 1
            end = offset + len(raw) + (0 if is_last else 1)
            if raw.strip():
                try:
                    obj = json.loads(raw.decode("utf-8"))
                    if not isinstance(obj, dict):
                        raise TypeError("not a JSON object")
                    self._apply(obj)
                    good_end = end
                except Exception as exc:  # noqa: BLE001 - one bad line must not lose the rest
                    self.dropped_lines += 1
                    logger.warning(
                        "search database %s: dropped line %d (%s)", self.path, n + 1, exc
                    )
            else:
                good_end = end if good_end == offset else good_end
            offset = end
        if good_end < len(data):  # torn tail: cut it so appends start on a clean line
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        if good_end and not data[:good_end].endswith(b"\n"):
            with open(self.path, "ab") as fh:
                fh.write(b"\n")

    def _apply(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        body = {k: v for k, v in obj.items() if k != "type"}
        if kind == "document":
            doc = StoredDocument.model_validate(body)
            self._docs.setdefault(doc.doc_id, doc)
            self._by_url.setdefault(doc.normalized_url, doc.doc_id)
        elif kind == "prediction":
            pred = Prediction.model_validate(body)
            self._predictions.setdefault((pred.record_id, pred.doc_id), pred)
        elif kind == "score":  # a run-wide score of an older file: its parent is unknown
            self.legacy_score_lines += 1
        elif kind == "record":
            record = SearchRecord.model_validate(body)
            self._records.setdefault(record.record_id, record)
        elif kind == "impact":
            credited = self._records.get(body["record_id"])
            impact = Impact.model_validate(body)
            if credited is not None and not any(
                i.iteration == impact.iteration for i in credited.impacts
            ):
                credited.impacts.append(impact)
        else:
            raise ValueError(f"unknown line type {kind!r}")

    def _append(self, objs: list[dict[str, Any]]) -> None:
        if self.path is None or not objs:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())

    # -- documents -------------------------------------------------------------------------

    def add_documents(self, docs: Iterable[Document], iteration: int) -> list[StoredDocument]:
        """Store search hits, de-duplicated by normalised URL.

        Args:
            docs: backend documents (order kept).
            iteration: the current outer iteration (``first_seen_iteration`` of new ones).

        Returns:
            One `StoredDocument` per distinct normalised URL in ``docs``, in input order;
            already known URLs return the existing document (same id, not rewritten).
        """
        out: list[StoredDocument] = []
        lines: list[dict[str, Any]] = []
        with self._lock:
            seen: set[str] = set()
            for doc in docs:
                key = doc.normalized_url
                if not key or key in seen:
                    continue
                seen.add(key)
                existing = self._by_url.get(key)
                if existing is not None:
                    out.append(self._docs[existing])
                    continue
                stored = StoredDocument(
                    doc_id=f"doc_{len(self._docs) + 1:06d}",
                    url=doc.url,
                    title=doc.title,
                    content=doc.content,
                    source=doc.source,
                    first_seen_iteration=iteration,
                )
                self._docs[stored.doc_id] = stored
                self._by_url[key] = stored.doc_id
                out.append(stored)
                lines.append({"type": "document", **stored.model_dump(mode="json")})
            self._append(lines)
        return [d.model_copy() for d in out]

    # -- predictions (per inner loop and parent) ----------------------------------------------

    def add_prediction(self, prediction: Prediction) -> bool:
        """Store one inner loop's prediction for one document.

        A known ``(record_id, doc_id)`` does nothing (a loop scores a document once; a resumed loop
        keeps it).

        Returns:
            True when added, False when that loop already had a prediction for the document.

        Raises:
            KeyError: unknown ``doc_id``.
            ValueError: ``predicted_score`` or ``parent_score`` is not a finite number.
        """
        for value in (prediction.predicted_score, prediction.parent_score):
            if not math.isfinite(value):
                raise ValueError(f"prediction scores must be finite, got {value!r}")
        key = (prediction.record_id, prediction.doc_id)
        with self._lock:
            if prediction.doc_id not in self._docs:
                raise KeyError(prediction.doc_id)
            if key in self._predictions:
                return False
            self._predictions[key] = prediction.model_copy()
            self._append([{"type": "prediction", **prediction.model_dump(mode="json")}])
            return True

    def predictions(
        self,
        *,
        record_id: str | None = None,
        doc_id: str | None = None,
        parent_id: str | None = None,
    ) -> list[Prediction]:
        """Stored predictions in the order they were made, filtered by the given fields."""
        with self._lock:
            return [
                p.model_copy()
                for p in self._predictions.values()
                if (record_id is None or p.record_id == record_id)
                and (doc_id is None or p.doc_id == doc_id)
                and (parent_id is None or p.parent_id == parent_id)
            ]

    def loop_scores(self, record_id: str) -> dict[str, float]:
        """Doc id → predicted score of every document the inner loop ``record_id`` scored."""
        return {p.doc_id: p.predicted_score for p in self.predictions(record_id=record_id)}

    def prediction_for(
        self, doc_id: str, parent_id: str, *, record_id: str | None = None
    ) -> Prediction | None:
        """The prediction that speaks for ``doc_id`` used on ``parent_id``.

        The prediction of the loop ``record_id`` when it scored the document for that parent;
        else the latest prediction any loop made for the document under that parent; else None
        (a prediction made for another parent is never reused: paper §3.4).
        """
        with self._lock:
            if record_id is not None:
                own = self._predictions.get((record_id, doc_id))
                if own is not None and own.parent_id == parent_id:
                    return own.model_copy()
            latest = None
            for p in self._predictions.values():
                if p.doc_id == doc_id and p.parent_id == parent_id:
                    latest = p
            return latest.model_copy() if latest is not None else None

    def get_document(self, doc_id: str) -> StoredDocument | None:
        """The stored document (a copy), or None when unknown."""
        with self._lock:
            doc = self._docs.get(doc_id)
            return doc.model_copy() if doc is not None else None

    def document_by_url(self, url: str) -> StoredDocument | None:
        """The stored document with this (normalised) URL, or None."""
        with self._lock:
            doc_id = self._by_url.get(normalize_url(url))
            return self._docs[doc_id].model_copy() if doc_id else None

    def document_text(self, doc_id: str) -> str:
        """Full text of a stored document.

        Raises:
            KeyError: unknown ``doc_id``.
        """
        with self._lock:
            return self._docs[doc_id].content

    def has_document(self, doc_id: str) -> bool:
        """True when the database holds document ``doc_id``."""
        with self._lock:
            return doc_id in self._docs

    def documents(self) -> list[StoredDocument]:
        """All stored documents in id order (copies)."""
        with self._lock:
            return [d.model_copy() for d in self._docs.values()]

    def recent_documents(self, n: int) -> list[StoredDocument]:
        """The ``n`` most recently stored documents, newest first (copies)."""
        if n <= 0:
            return []
        with self._lock:
            return [d.model_copy() for d in list(self._docs.values())[-n:]][::-1]

    # -- records and impacts ---------------------------------------------------------------

    @staticmethod
    def record_id_for(iteration: int, kind: str = "ret") -> str:
        """Replay-stable id of a record of ``iteration``: ``ret_000012`` / ``lku_000012``.

        One record of each kind per iteration at most: its retrieval (``ret``), its look-up
        (``lku``).
        """
        return f"{kind}_{iteration:06d}"

    def next_record_id(self) -> str:
        """``ret_<n+1>`` for n stored records (not replay-stable; see `record_id_for`)."""
        with self._lock:
            return f"ret_{len(self._records) + 1:06d}"

    def add_record(self, record: SearchRecord) -> bool:
        """Append a retrieval record; a known ``record_id`` does nothing.

        Returns:
            True when added, False when the id was already present.
        """
        with self._lock:
            if record.record_id in self._records:
                return False
            stored = record.model_copy(deep=True)
            self._records[stored.record_id] = stored
            self._append([{"type": "record", **stored.model_dump(mode="json")}])
            return True

    def add_impact(self, record_id: str, impact: Impact) -> bool:
        """Append a realised outcome, once per ``(record_id, iteration)``.

        Append a realised outcome; one already present for ``(record_id, iteration)``
        does nothing.

        Returns:
            True when added, False when already present.

        Raises:
            KeyError: unknown ``record_id``.
        """
        with self._lock:
            record = self._records[record_id]
            if any(i.iteration == impact.iteration for i in record.impacts):
                return False
            record.impacts.append(impact.model_copy())
            self._append(
                [{"type": "impact", "record_id": record_id, **impact.model_dump(mode="json")}]
            )
            return True

    def sources_of(self, doc_ids: Iterable[str], *, before: int) -> list[str]:
        """The records that found ``doc_ids``: the entries a look-up of them draws on.

        A look-up reuses documents an earlier retrieval found; the realised Δ of its step is
        credited to those retrievals too (the world-knowledge design credits "the entry that
        fed the step"), so Δ-based selection rewards the queries that found useful documents.
        A document's sources are the non-look-up records made before iteration ``before``
        that handed it to the outer loop (``final_doc_ids``), else, for a document no record
        kept, those whose inner-loop rounds returned it.

        Returns:
            Record ids in insertion order.
        """
        wanted = set(doc_ids)
        with self._lock:
            earlier = [
                r
                for r in self._records.values()
                if r.decision != "look-up" and r.iteration < before
            ]
        never_kept = wanted - {d for r in earlier for d in r.final_doc_ids}
        out = []
        for r in earlier:
            returned = {res.doc_id for rnd in r.rounds for res in rnd.results}
            if wanted & set(r.final_doc_ids) or never_kept & returned:
                out.append(r.record_id)
        return out

    def get_record(self, record_id: str) -> SearchRecord | None:
        """A copy of record ``record_id``, or None."""
        with self._lock:
            rec = self._records.get(record_id)
            return rec.model_copy(deep=True) if rec is not None else None

    def records(self) -> list[SearchRecord]:
        """All records in insertion order (deep copies)."""
        with self._lock:
            return [r.model_copy(deep=True) for r in self._records.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    # -- selection -------------------------------------------------------------------------

    def select(
        self,
        policy: SelectPolicy,
        k: int,
        *,
        query_text: str | None = None,
        weights: tuple[float, float] = (0.5, 0.5),
    ) -> list[SearchRecord]:
        """The records shown to the gate and the query constructor (docs/design.md §1).

        Args:
            policy: ``delta``: ⌈k/2⌉ records with the highest and ⌊k/2⌋ with the lowest
                realised Δ (mean over impacts), records without a realised Δ fill any
                remaining slots, newest first; ``relevance_novelty``: greedy selection by
                the relevance/novelty assessments stored at retrieval time (the listwise
                reranker's ratings, else the hypothetical scores; `_relevance_novelty`),
                weighted by ``weights``, no LLM call; ``recency``: newest first; ``full``:
                every record (``k`` ignored).
            k: number of records (≤ 0 gives ``[]`` except for ``full``).
            query_text: unused by the built-in policies (kept for callers that pass the
                open knowledge gap).
            weights: ``(relevance weight, novelty weight)`` of ``relevance_novelty``
                (``retrieval.rerank_relevance_weight`` / ``rerank_novelty_weight``).

        Returns:
            Deep copies of the selected records; deterministic for equal inputs.

        Raises:
            ValueError: unknown policy.
        """
        records = self.records()
        if policy == "full":
            return records
        if k <= 0 or not records:
            return []
        order = {r.record_id: n for n, r in enumerate(records)}
        newest = sorted(records, key=lambda r: (-r.iteration, -order[r.record_id]))
        if policy == "recency":
            return newest[:k]
        if policy == "delta":
            with_delta = [r for r in records if r.realised_delta is not None]
            by_delta = sorted(
                with_delta, key=lambda r: (-(r.realised_delta or 0.0), order[r.record_id])
            )
            n_high = min(len(by_delta), (k + 1) // 2)
            chosen = by_delta[:n_high]
            rest = by_delta[n_high:]
            n_low = min(len(rest), k - n_high)
            chosen += list(reversed(rest))[:n_low] if n_low else []
            taken = {r.record_id for r in chosen}
            chosen += [r for r in newest if r.record_id not in taken][: k - len(chosen)]
            return chosen
        if policy == "relevance_novelty":
            return self._relevance_novelty(records, newest, k, weights)
        raise ValueError(f"unknown select policy {policy!r}")

    def _relevance_novelty(
        self,
        records: list[SearchRecord],
        newest: list[SearchRecord],
        k: int,
        weights: tuple[float, float],
    ) -> list[SearchRecord]:
        """Greedy selection by the assessments stored at retrieval time (no LLM call).

        A record's relevance and novelty are the means of its final documents' listwise
        rerank ratings (`RoundResult.relevance` / ``novelty``) when it has them; otherwise
        its relevance is its final documents' mean predicted gain (predicted child score −
        parent score), min-max normalised over the candidates to [0, 1], and its novelty
        1 − the largest Jaccard overlap of its final documents with an already selected
        record. Value: ``w_rel · relevance + w_nov · novelty``; ties: newest first.
        """
        rank = {r.record_id: n for n, r in enumerate(newest)}
        rated = {r.record_id: _rerank_assessment(r) for r in records}
        gains = {r.record_id: self._predicted_gain(r) for r in records}
        known = [g for g in gains.values() if g is not None]
        low, high = (min(known), max(known)) if known else (0.0, 0.0)
        doc_sets = {r.record_id: set(r.final_doc_ids) for r in records}
        w_rel, w_nov = weights
        chosen: list[SearchRecord] = []
        pool = list(records)
        while pool and len(chosen) < k:

            def value(r: SearchRecord) -> tuple[float, int]:
                assessment = rated[r.record_id]
                if assessment is not None:
                    relevance, novelty = assessment
                else:
                    gain = gains[r.record_id]
                    relevance = (
                        0.0 if gain is None else 1.0 if high == low else (gain - low) / (high - low)
                    )
                    overlap = 0.0
                    mine = doc_sets[r.record_id]
                    for c in chosen:
                        union = mine | doc_sets[c.record_id]
                        if union:
                            overlap = max(overlap, len(mine & doc_sets[c.record_id]) / len(union))
                    novelty = 1.0 - overlap
                score = w_rel * relevance + w_nov * novelty
                return (-round(score, 12), rank[r.record_id])

            best = min(pool, key=value)
            chosen.append(best)
            pool.remove(best)
        return chosen

    def _predicted_gain(self, record: SearchRecord) -> float | None:
        """Mean predicted gain (predicted child − parent score) of the record's final documents.

        Its own inner loop's predictions, else those in its round results.
        """
        scores = self.loop_scores(record.record_id)
        for rnd in record.rounds:
            for result in rnd.results:
                if result.predicted_score is not None:
                    scores.setdefault(result.doc_id, result.predicted_score)
        mine = [scores[d] for d in record.final_doc_ids if d in scores]
        return sum(mine) / len(mine) - record.parent_score if mine else None

    def url_stats(self) -> dict[str, float | int]:
        """URL novelty over every round's results (docs/design.md §6).

        Returns:
            ``returned`` (URLs returned, all rounds of all records, in order), ``distinct``
            (distinct normalised URLs), ``seen_before`` (returned URLs already returned
            earlier), ``seen_before_share`` (``seen_before / returned``; 0.0 when none),
            ``documents`` (stored documents).
        """
        with self._lock:
            seen: set[str] = set()
            returned = repeated = 0
            for record in self._records.values():
                for rnd in record.rounds:
                    for result in rnd.results:
                        key = normalize_url(result.url)
                        returned += 1
                        if key in seen:
                            repeated += 1
                        seen.add(key)
            return {
                "returned": returned,
                "distinct": len(seen),
                "seen_before": repeated,
                "seen_before_share": repeated / returned if returned else 0.0,
                "documents": len(self._docs),
            }

    def render_for_prompt(
        self,
        records: Iterable[SearchRecord],
        max_chars: int,
        *,
        documents_per_entry: int | None = None,
    ) -> str:
        """Compact, deterministic text listing of ``records`` for the gate's prompt.

        One block per record: id, iteration, decision, realised Δ and outcomes; the queries by
        round; the final documents with titles and the scores predicted for the record's
        parent (`prediction_for`; ``n/a`` when none was made for it). Titles are untrusted
        text: each is written on one line with code fences (runs of backticks/tildes) defused,
        so it cannot forge a prompt section. Blocks that do not fit in ``max_chars`` characters
        are left out and counted in a last line.

        Returns:
            The listing (``"(no earlier searches)"`` when ``records`` is empty); at most
            ``max_chars`` characters.
        """
        records = list(records)
        if not records:
            return "(no earlier searches)"[:max_chars]
        blocks = [self._render_record(r, documents_per_entry) for r in records]
        out: list[str] = []
        for block in blocks:
            if len("\n".join([*out, block])) > max_chars:
                break
            out.append(block)

        def note(n: int) -> str:
            return f"… {n} more record(s) omitted"

        while out and len(blocks) > len(out):
            if len("\n".join([*out, note(len(blocks) - len(out))])) <= max_chars:
                break
            out.pop()
        omitted = len(blocks) - len(out)
        if omitted and not out:
            # Nothing fits whole: show the head of the first record rather than nothing.
            room = max_chars - len(note(omitted - 1)) - 1 if omitted > 1 else max_chars
            if room > 40:
                out.append(blocks[0][: room - 1] + "…")
                omitted -= 1
        if omitted:
            out.append(note(omitted))
        return "\n".join(out)[:max_chars]

    def _render_record(self, r: SearchRecord, documents_per_entry: int | None = None) -> str:
        impacts = (
            ", ".join(f"it{i.iteration} {i.outcome} Δ={_signed(i.delta)}" for i in r.impacts)
            or "no outcome yet"
        )
        header = (
            f"[{r.record_id}] iteration {r.iteration} · {r.decision} · parent "
            f"{r.parent_id} (score {_fmt(r.parent_score)}) · realised Δ "
            f"{_signed(r.realised_delta)} ({impacts})"
        )
        lines = [header]
        for rnd in r.rounds:
            if rnd.queries:
                lines.append(
                    f"  round {rnd.round} queries: "
                    + " | ".join(json.dumps(q) for q in rnd.queries)
                )
        shown = (
            r.final_doc_ids
            if documents_per_entry is None
            else r.final_doc_ids[:documents_per_entry]
        )
        for doc_id in shown:
            doc = self._docs.get(doc_id)
            title = one_line(doc.title) if doc is not None else "(unknown document)"
            found = self.prediction_for(doc_id, r.parent_id, record_id=r.record_id)
            pred = found.predicted_score if found is not None else None
            if len(title) > 120:
                title = title[:117] + "..."
            lines.append(f'  {doc_id} "{title}" predicted {_fmt(pred)}')
        return "\n".join(lines)


def load_search_db(path: Path) -> SearchDatabase | None:
    """D_search of a run directory, for reading: loaded from a temporary copy of ``path``.

    The copy keeps a running run's file untouched. None when the file is missing.
    """
    if not path.is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="evoduet-report-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        return SearchDatabase(copy, fsync=False)
