"""D_search: stable ids, JSONL persistence, idempotent replay, selection policies, rendering."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from evoduet_graph.search import (
    Document,
    Impact,
    Prediction,
    RoundLog,
    RoundResult,
    SearchDatabase,
    SearchRecord,
)


def _doc(url: str, title: str = "", content: str = "text") -> Document:
    return Document(url=url, title=title or url, content=content, source="fake")


def _record(
    db: SearchDatabase,
    iteration: int,
    queries: list[str],
    urls: list[str],
    *,
    decision: str = "retrieve",
) -> SearchRecord:
    stored = db.add_documents([_doc(u, title=f"title {u}") for u in urls], iteration)
    record = SearchRecord(
        record_id=SearchDatabase.record_id_for(iteration),
        iteration=iteration,
        parent_id=f"prog_{iteration:04d}",
        parent_score=1.0,
        knowledge_state={"known": "k", "established": "e", "unresolved": "u"},
        rounds=[
            RoundLog(
                round=i,
                queries=[q],
                results=[RoundResult(doc_id=d.doc_id, url=d.url, title=d.title) for d in stored],
                retained=[d.doc_id for d in stored[:2]],
            )
            for i, q in enumerate(queries)
        ],
        final_doc_ids=[d.doc_id for d in stored],
        decision=decision,
    )
    assert db.add_record(record)
    return record


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_document_ids_are_stable_and_survive_reload(tmp_path: Path) -> None:
    path = tmp_path / "run" / "search_database.jsonl"
    db = SearchDatabase(path)
    first = db.add_documents(
        [_doc("https://a.org/x"), _doc("https://b.org"), _doc("https://a.org/x/#top")], 1
    )
    assert [d.doc_id for d in first] == ["doc_000001", "doc_000002"]
    again = db.add_documents(
        [_doc("https://www.A.org/x/?utm_source=feed"), _doc("pydoc:numpy.linalg.norm")], 2
    )
    assert [d.doc_id for d in again] == ["doc_000001", "doc_000003"]
    assert again[0].first_seen_iteration == 1 and again[1].first_seen_iteration == 2
    assert db.has_document("doc_000003") and not db.has_document("doc_000009")
    assert db.get_document("doc_000009") is None
    assert db.document_text("doc_000002") == "text"
    with pytest.raises(KeyError):
        db.document_text("doc_000009")
    assert [line["type"] for line in _lines(path)] == ["document"] * 3

    reloaded = SearchDatabase(path)
    assert reloaded.dropped_lines == 0
    assert reloaded.document_by_url("https://a.org/x").doc_id == "doc_000001"
    assert [d.doc_id for d in reloaded.add_documents([_doc("https://c.org")], 3)] == ["doc_000004"]


def _prediction(
    doc_id: str,
    record_id: str = "ret_000001",
    parent: str = "p1",
    score: float = 0.75,
    round_: int = 0,
) -> Prediction:
    return Prediction(
        record_id=record_id,
        doc_id=doc_id,
        iteration=int(record_id[-6:]),
        round=round_,
        parent_id=parent,
        parent_score=0.5,
        predicted_score=score,
    )


def test_predictions_belong_to_a_loop_and_a_parent(tmp_path: Path) -> None:
    """Paper §3.4: a document is scored once per inner loop, for that loop's parent.

    Another loop (another parent) scores it again; every prediction is kept with its record, round,
    parent id and parent score.
    """
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path)
    (doc,) = db.add_documents([_doc("https://a.org")], 1)
    assert db.add_prediction(_prediction(doc.doc_id)) is True
    # the same loop never scores it twice (a resumed loop keeps the first)
    assert db.add_prediction(_prediction(doc.doc_id, score=0.1, round_=2)) is False
    # a later loop under another parent scores it again
    assert db.add_prediction(_prediction(doc.doc_id, "ret_000004", parent="p2", score=0.9))
    with pytest.raises(KeyError):
        db.add_prediction(_prediction("doc_999999"))
    with pytest.raises(ValueError, match="finite"):
        db.add_prediction(_prediction(doc.doc_id, "ret_000005", score=float("nan")))
    assert db.loop_scores("ret_000001") == {doc.doc_id: 0.75}
    assert db.loop_scores("ret_000004") == {doc.doc_id: 0.9}
    assert db.loop_scores("ret_000009") == {}
    assert db.prediction_for(doc.doc_id, "p1").predicted_score == 0.75
    assert db.prediction_for(doc.doc_id, "p2").predicted_score == 0.9
    assert db.prediction_for(doc.doc_id, "p3") is None  # never reused for another parent
    # the record's own loop wins over a later loop for the same parent
    db.add_prediction(_prediction(doc.doc_id, "ret_000006", parent="p1", score=0.2))
    assert db.prediction_for(doc.doc_id, "p1").predicted_score == 0.2
    assert db.prediction_for(doc.doc_id, "p1", record_id="ret_000001").predicted_score == 0.75

    reloaded = SearchDatabase(path)
    assert reloaded.dropped_lines == 0
    assert [
        (p.record_id, p.round, p.parent_id, p.parent_score, p.predicted_score)
        for p in reloaded.predictions(doc_id=doc.doc_id)
    ] == [
        ("ret_000001", 0, "p1", 0.5, 0.75),
        ("ret_000004", 0, "p2", 0.5, 0.9),
        ("ret_000006", 0, "p1", 0.5, 0.2),
    ]
    assert [line["type"] for line in _lines(path)].count("prediction") == 3


def test_legacy_run_wide_score_lines_are_read_and_ignored(tmp_path: Path) -> None:
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path)
    (doc,) = db.add_documents([_doc("https://a.org")], 1)
    with path.open("a") as fh:
        fh.write(json.dumps({"type": "score", "doc_id": doc.doc_id, "predicted_score": 0.3}) + "\n")
    old = SearchDatabase(path)
    assert old.dropped_lines == 0 and old.legacy_score_lines == 1
    assert old.predictions() == []


def test_recent_documents_newest_first(tmp_path: Path) -> None:
    db = SearchDatabase(None)
    db.add_documents([_doc(f"https://r.org/{i}") for i in range(4)], 1)
    assert [d.doc_id for d in db.recent_documents(2)] == ["doc_000004", "doc_000003"]
    assert len(db.recent_documents(10)) == 4 and db.recent_documents(0) == []


def test_torn_last_line_is_dropped_counted_and_cut(tmp_path: Path) -> None:
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path)
    _record(db, 1, ["circle packing bounds"], ["https://a.org", "https://b.org"])
    good = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(b'{"type": "impact", "record_id": "ret_000001", "itera')  # killed mid-write

    reloaded = SearchDatabase(path)
    assert reloaded.dropped_lines == 1
    assert [r.record_id for r in reloaded.records()] == ["ret_000001"]
    assert path.read_bytes() == good  # torn tail cut: appends start on a clean line
    reloaded.add_impact("ret_000001", Impact(iteration=1, parent_score=1.0))
    third = SearchDatabase(path)
    assert third.dropped_lines == 0
    assert len(third.records()[0].impacts) == 1


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path)
    db.add_documents([_doc("https://a.org")], 1)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    reloaded = SearchDatabase(path)
    assert reloaded.dropped_lines == 0 and reloaded.has_document("doc_000001")
    reloaded.add_documents([_doc("https://b.org")], 1)
    assert SearchDatabase(path).has_document("doc_000002")


def test_record_and_impact_appends_are_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path)
    record = _record(db, 3, ["q0", "q1"], ["https://a.org"])
    n_lines = len(_lines(path))
    assert db.add_record(record) is False  # a resumed run replays the node
    impact = Impact(iteration=3, parent_score=1.0, child_score=1.2, delta=0.2, outcome="improved")
    assert db.add_impact(record.record_id, impact) is True
    assert db.add_impact(record.record_id, impact) is False
    assert db.add_impact(
        record.record_id, Impact(iteration=4, parent_score=1.2, outcome="not_evaluated")
    )
    assert len(_lines(path)) == n_lines + 2
    with pytest.raises(KeyError):
        db.add_impact("ret_999999", impact)

    reloaded = SearchDatabase(path)
    assert reloaded.records() == db.records()
    rec = reloaded.get_record(record.record_id)
    assert [i.iteration for i in rec.impacts] == [3, 4]
    assert rec.realised_delta == pytest.approx(0.2)
    assert rec.queries == ["q0", "q1"]
    assert (
        reloaded.add_record(record) is False
        and reloaded.add_impact(record.record_id, impact) is False
    )
    assert SearchDatabase.record_id_for(12) == "ret_000012"
    assert reloaded.next_record_id() == "ret_000002"


def test_a_look_up_draws_on_the_records_that_found_its_documents() -> None:
    db = SearchDatabase(None)
    first = _record(db, 1, ["q1"], ["https://a.org", "https://b.org"])
    second = _record(db, 2, ["q2"], ["https://c.org"])
    # returned by a round of iteration 3 but kept by no record
    stored = db.add_documents([_doc("https://d.org")], 3)
    third = SearchRecord(
        record_id="ret_000003",
        iteration=3,
        parent_id="p",
        parent_score=1.0,
        rounds=[
            RoundLog(
                round=0,
                queries=["q3"],
                results=[RoundResult(doc_id=stored[0].doc_id, url="https://d.org")],
            )
        ],
        final_doc_ids=[],
    )
    assert db.add_record(third)
    lookup = SearchRecord(
        record_id="lku_000004",
        iteration=4,
        parent_id="p",
        parent_score=1.0,
        final_doc_ids=[first.final_doc_ids[1], stored[0].doc_id],
        decision="look-up",
    )
    assert db.add_record(lookup)
    wanted = lookup.final_doc_ids
    assert db.sources_of(wanted, before=4) == ["ret_000001", "ret_000003"]
    assert db.sources_of(second.final_doc_ids, before=5) == ["ret_000002"]
    assert db.sources_of(wanted, before=1) == []  # only records made before the look-up
    assert db.sources_of(["doc_999999"], before=9) == []


def test_select_delta_recency_full(tmp_path: Path) -> None:
    db = SearchDatabase(None)
    deltas = {1: 0.5, 2: -0.3, 3: 0.1, 4: None, 5: 0.9, 6: -0.8}
    for it, delta in deltas.items():
        rec = _record(db, it, [f"query {it}"], [f"https://site{it}.org"])
        if delta is not None:
            db.add_impact(
                rec.record_id,
                Impact(
                    iteration=it,
                    parent_score=1,
                    delta=delta,
                    child_score=1 + delta,
                    outcome="improved",
                ),
            )

    def ids(recs: list[SearchRecord]) -> list[int]:
        return [r.iteration for r in recs]

    assert ids(db.select("delta", 4)) == [5, 1, 6, 2]  # two highest, then the two lowest
    assert ids(db.select("delta", 3)) == [5, 1, 6]
    assert ids(db.select("delta", 7)) == [5, 1, 3, 2, 6, 4]  # no-impact records last
    assert ids(db.select("recency", 3)) == [6, 5, 4]
    assert ids(db.select("full", 0)) == [1, 2, 3, 4, 5, 6]
    assert db.select("recency", 0) == [] and db.select("delta", 0) == []
    with pytest.raises(ValueError, match="unknown select policy"):
        db.select("bogus", 2)  # type: ignore[arg-type]
    assert SearchDatabase(None).select("delta", 3) == []


def test_select_relevance_novelty_without_ratings(tmp_path: Path) -> None:
    """Records without listwise-rerank ratings.

    Relevance is the (min-max normalised) predicted gain, novelty the document overlap with records
    already chosen; no LLM call. (Ordering by stored rerank ratings:
    tests/integration/test_ladder_rows.py.)
    """
    db = SearchDatabase(None)
    _record(db, 1, ["simulated annealing schedule"], ["https://sa.org"])
    _record(db, 2, ["hexagonal lattice circle packing"], ["https://hex.org", "https://p.org"])
    _record(db, 3, ["circle packing hexagonal layouts"], ["https://hex.org", "https://p.org"])
    _record(db, 4, ["circle packing bounds"], ["https://bounds.org"])
    # no predictions: equal relevance; the first pick is the newest, then novelty avoids
    # record 3's twin (record 2 shares all of record 3's documents)
    chosen = db.select("relevance_novelty", 3)
    assert [r.iteration for r in chosen] == [4, 3, 1]
    assert db.select("relevance_novelty", 3) == db.select("relevance_novelty", 3)


def test_url_stats(tmp_path: Path) -> None:
    db = SearchDatabase(None)
    assert db.url_stats()["seen_before_share"] == 0.0
    _record(db, 1, ["a", "b"], ["https://a.org", "https://b.org"])  # 2 rounds × 2 results
    _record(db, 2, ["c"], ["https://www.a.org/", "https://c.org"])
    stats = db.url_stats()
    assert stats["returned"] == 6
    assert stats["distinct"] == 3
    assert stats["seen_before"] == 3
    assert stats["seen_before_share"] == pytest.approx(0.5)
    assert stats["documents"] == 3


def test_render_for_prompt_is_compact_and_deterministic(tmp_path: Path) -> None:
    db = SearchDatabase(None)
    rec = _record(db, 2, ['circle packing "bounds"'], ["https://a.org", "https://b.org"])
    db.add_prediction(_prediction("doc_000001", rec.record_id, parent=rec.parent_id, score=2.61))
    # a prediction made for another parent is not shown as this record's
    db.add_prediction(_prediction("doc_000002", "ret_000009", parent="someone else", score=9.0))
    db.add_impact(
        rec.record_id,
        Impact(iteration=2, parent_score=2.5, child_score=2.55, delta=0.05, outcome="improved"),
    )
    _record(db, 3, ["annealing"], ["https://c.org"], decision="look-up")
    text = db.render_for_prompt(db.records(), 10_000)
    assert text == db.render_for_prompt(db.records(), 10_000)
    assert "[ret_000002] iteration 2 · retrieve" in text
    assert "realised Δ +0.05 (it2 improved Δ=+0.05)" in text
    assert 'round 0 queries: "circle packing \\"bounds\\""' in text
    assert 'doc_000001 "title https://a.org" predicted 2.61' in text
    assert 'doc_000002 "title https://b.org" predicted n/a' in text
    assert "[ret_000003] iteration 3 · look-up" in text and "no outcome yet" in text

    short = db.render_for_prompt(db.records(), 300)
    assert len(short) <= 300 and "more record(s) omitted" in short
    assert "[ret_000002]" in short
    assert db.render_for_prompt([], 100) == "(no earlier searches)"
    assert len(db.render_for_prompt(db.records(), 60)) <= 60


def test_concurrent_writes_keep_ids_unique(tmp_path: Path) -> None:
    path = tmp_path / "search_database.jsonl"
    db = SearchDatabase(path, fsync=False)

    def worker(n: int) -> None:
        for i in range(25):
            db.add_documents([_doc(f"https://site{i % 30}.org/{n % 3}")], n)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    docs = db.documents()
    assert len(docs) == len({d.doc_id for d in docs}) == len({d.url for d in docs}) == 75
    reloaded = SearchDatabase(path)
    assert reloaded.dropped_lines == 0 and len(reloaded.documents()) == 75
