"""Concurrent use.

The program store and the search database under N=8 parallel candidates and thread-heavy fakes. The
run-directory lock (a second ``run``/``resume`` refuses) is tested through the CLI in
``test_cli_errors.py``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.api import RunError
from evoduet_graph.evaluation import EvaluationOutcome
from evoduet_graph.rundir.lock import RunDirLock
from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from evoduet_graph.search import Document
from evoduet_graph.search.database import Prediction, SearchDatabase
from tests.conftest import SMOKE_TASK
from tests.fakes import CountingEvaluator, FakeSearcher, KnowledgeResponder, ScriptedChatModel
from tests.fault_harness import InProcessEvaluator, parent_parameters, smoke_program


def _busy_threads(n: int) -> None:
    """Start and join ``n`` threads that each do a little work (a thread-heavy model)."""
    out: list[int] = []
    threads = [
        threading.Thread(target=lambda i=i: out.append(sum(range(2000 + i)))) for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _answer(messages: Any) -> str:
    text = str(messages[-1].content)
    radius, spread = parent_parameters(text)
    salt = int(hashlib.sha256(text.encode()).hexdigest()[:6], 16)
    _busy_threads(6)
    time.sleep((salt % 5) / 100)
    # each candidate of an iteration differs: the thread doing the call picks a step
    step = 1 + (threading.get_ident() + time.perf_counter_ns()) % 7
    return f"```python\n{smoke_program(min(1.0, radius + 0.01 * step), spread)}```"


def test_eight_parallel_candidates_keep_store_and_search_database_consistent(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    responder = KnowledgeResponder(gate="retrieve", generate=_answer)
    llm = ScriptedChatModel(responses=[], default=responder)
    evaluator = CountingEvaluator(InProcessEvaluator(SMOKE_TASK, workers=8), tmp_path / "evals")
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": 3,
            "candidates": 8,
            "population": {"num_islands": 2},
            "prompt": {"diff_based": False},
            "gate": {"mode": "always"},
            "retrieval": {"inner_rounds": 2, "queries_per_round": 3, "search_retries": 0},
            "evaluation": {"workers": 8},
        }
    )
    result = run(
        load_task(SMOKE_TASK),
        cfg,
        llm=llm,
        evaluator=evaluator,
        run_dir=run_dir,
        searcher=FakeSearcher(),
    )
    assert result.iterations == 3
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        programs = {p.id: p for p in store.all_programs()}
        for it in (1, 2, 3):
            ids = [f"it{it:05d}-c{i}" for i in range(8)]
            assert all(i in programs for i in ids), sorted(programs)
            for i in ids:
                row = programs[i]
                assert row.status in ("evaluated", "invalid", "duplicate"), row
                if row.status == "evaluated":
                    assert row.code is not None and store.cached_evaluation(row.code) is not None
                else:  # a rewrite identical to its parent (radius already at 1.0), or a copy
                    assert row.error  # of a population program (the novelty check)
        assert sum(p.status == "evaluated" for p in programs.values()) >= 12
    finally:
        store.close()
    counts = Counter(e["sha"] for e in evaluator.evaluated())
    assert counts and max(counts.values()) == 1  # each distinct program evaluated once
    lines = (run_dir / "search_database.jsonl").read_text().splitlines()
    docs = [json.loads(x) for x in lines if json.loads(x)["type"] == "document"]
    assert len({d["doc_id"] for d in docs}) == len(docs) == len({d["url"] for d in docs})


def test_program_store_under_many_threads(tmp_path: Path) -> None:
    store = ProgramStore(tmp_path / "programs.sqlite")

    def work(t: int) -> None:
        for i in range(60):
            code = f"print({t}, {i})\n"
            row = ProgramRow(
                id=f"t{t}-{i}",
                code=code,
                parent_id=None,
                iteration=i,
                kind="rewrite",
                status="generated",
            )
            store.put_program(row)
            store.put_evaluation(code, EvaluationOutcome(score=float(i), valid=True))
            assert store.get_program(row.id).code == code
            assert store.cached_evaluation(code).score == float(i)
            if i % 10 == 0:
                store.save_population(i, {"writer": t, "i": i})
                store.recent_attempts(5)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(work, range(16)))
    assert len(store.all_programs()) == 16 * 60
    store.close()
    reopened = ProgramStore(tmp_path / "programs.sqlite")
    assert len(reopened.all_programs()) == 16 * 60
    reopened.close()


def test_search_database_under_many_threads(tmp_path: Path) -> None:
    db = SearchDatabase(tmp_path / "search_database.jsonl")

    def work(t: int) -> None:
        for i in range(40):
            docs = [
                Document(url=f"https://site.example/{(t * 7 + i) % 50}", title="t", content="c"),
                Document(url=f"https://www.site.example/{i % 50}/", title="t", content="c"),
            ]
            for doc in db.add_documents(docs, iteration=i):
                db.add_prediction(
                    Prediction(
                        record_id="ret_000001",
                        doc_id=doc.doc_id,
                        iteration=1,
                        round=0,
                        parent_id="p",
                        parent_score=0.1,
                        predicted_score=0.5,
                    )
                )

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(work, range(16)))
    reloaded = SearchDatabase(tmp_path / "search_database.jsonl")
    assert reloaded.dropped_lines == 0
    lines = [json.loads(x) for x in (tmp_path / "search_database.jsonl").read_text().splitlines()]
    docs = [x for x in lines if x["type"] == "document"]
    scores = [x for x in lines if x["type"] == "prediction"]
    assert len(docs) == 50 and len({d["doc_id"] for d in docs}) == 50
    assert len(scores) == 50 and len({s["doc_id"] for s in scores}) == 50


def test_run_api_refuses_a_locked_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    llm = ScriptedChatModel(responses=[], default="no change")
    with RunDirLock(run_dir), pytest.raises(RunError, match="in use by another evoduet process"):
        run(
            load_task(SMOKE_TASK),
            EvoDuetConfig(iterations=1),
            llm=llm,
            evaluator=InProcessEvaluator(SMOKE_TASK),
            run_dir=run_dir,
        )
    assert sorted(p.name for p in run_dir.iterdir()) == [".lock"]


_HOLD_AND_FORK = """
import os, sys, time
from evoduet_graph.rundir.lock import RunDirLock
lock = RunDirLock(sys.argv[1]).acquire()
child = os.fork()
if child == 0:  # a child between fork and exec (as when starting an evaluation) lingers
    time.sleep(60)
    os._exit(0)
print(child, flush=True)
time.sleep(60)
"""


def test_a_killed_holder_releases_the_lock_even_while_its_forked_child_lives(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_FORK, str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(holder.stdout.readline())
    try:
        with pytest.raises(Exception, match="in use by another evoduet process"):
            RunDirLock(run_dir).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        os.kill(child, 0)  # the forked child is still alive
        with RunDirLock(run_dir) as lock:
            assert lock.held
        # a second lock in this process is refused while the first is held, and the refusal
        # does not drop the first one
        first = RunDirLock(run_dir).acquire()
        with pytest.raises(Exception, match="in use by another evoduet process"):
            RunDirLock(run_dir).acquire()
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                (
                    "import sys; from evoduet_graph.rundir.lock import RunDirLock; "
                    "RunDirLock(sys.argv[1]).acquire()"
                ),
                str(run_dir),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert probe.returncode != 0 and "in use by another evoduet process" in probe.stderr
        first.release()
    finally:
        holder.kill()
        os.kill(child, signal.SIGKILL)
