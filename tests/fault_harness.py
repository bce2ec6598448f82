"""Kill-anywhere fault harness: deterministic fake runs, SIGKILL at chosen points, invariants.

A *scenario* runs a small EvoDuet run (smoke task, 3 iterations, LLM gate, 2 inner rounds,
2-3 candidates in parallel, a deterministic fake model, a fake search backend and an in-process
evaluator) in a forked child that kills itself with ``SIGKILL`` at the n-th *fault point*, then
resumes it in a second child until it finishes, and checks the result against an uninterrupted
reference run with the same seed:

* the final population snapshot, the program table (ids, code hashes, status, scores), the best
  program and the search database (documents, records, impacts) equal the reference's (when
  the product skipped a program because its evaluation was in flight at both kills of a double
  kill, as its rule requires, the reference is the uninterrupted run that skips it:
  `_skipped_by_policy`);
* no evaluation that was persisted before the kill is run again (evaluations in flight at the
  kill may be redone: that is "the work in flight"), counted with `tests.fakes.CountingEvaluator`;
* ``search_database.jsonl`` has no torn line and no duplicate document, record or impact;
* ``events.jsonl`` reads back completely (every line a JSON object).

Fault points are hooks installed in the child only: node entry (``enter:<node>``, outer and
inner graphs), each model call (``llm:<kind>``), each search (``search``), evaluation start and
end (``eval:start`` / ``eval:end``), each event line, each search-database append and
program-store write, and each checkpoint write (``ckpt``) and saved task writes
(``ckpt:writes``). Line-writing points can also *tear*:
write half of the line, then die (``torn``).

The model answers are a function of the prompt text and, for ``generate``, of the call's
metadata (iteration, candidate index) — never of call counts — so a resumed process asks and
gets exactly what the uninterrupted one did.

Forking from one parent that imported everything once makes each run cost a fraction of a
second instead of a 3 s interpreter start. Usage (``python -m tests.fault_harness --help``)::

    python -m tests.fault_harness --points 24 --jobs 2 --out /tmp/kill   # prints a JSON summary

The scenarios an invocation runs are fixed by ``--points``, ``--salt`` and ``--double-every``
(chosen on `canonical_trace`); each kill is recorded as ``LABEL@K`` (the K-th fault point with
that label) and every failed scenario carries a ``replay`` command that runs it alone, e.g.::

    python -m tests.fault_harness --kill 'store:put_evaluation@3' --then 'eval:end@1' --repeat 20

(``--repeat`` runs it again and again: what the other threads of the killed process had done
at the kill still varies, and a fault that depends on it shows up as a share of the runs.)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from evoduet_graph import EvoDuetConfig, load_task
from evoduet_graph.evaluation import EvaluationOutcome, score_from_metrics
from tests.fakes import CountingEvaluator, FakeSearcher, prompt_kind, prompt_text, scored_documents

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TASK = ROOT / "tasks" / "smoke_polygon_area"

#: The harness run's configuration (small and fast; every loop is exercised).
HARNESS_CONFIG: dict[str, Any] = {
    "iterations": 3,
    "candidates": 2,
    "candidates_after_retrieval": 3,
    "seed": 11,
    "max_consecutive_failures": 10,
    "gate": {"mode": "llm"},
    "retrieval": {"inner_rounds": 2, "search_retries": 0, "results_per_query": 3, "top_k": 2},
    "population": {"num_islands": 2},
    "prompt": {"diff_based": False},
    "evaluation": {"workers": 2},
    "llm": {"max_retries": 0},
}


# ------------------------------------------------------------------------------------------
# fault points
# ------------------------------------------------------------------------------------------


class FaultPoints:
    """Process-wide fault-point counter of a harness child.

    ``kill_at`` selects the point at which the process dies: a 1-based index over all points
    of the process, or ``(label, k)``, the k-th point with that label (stable under the thread
    interleaving of parallel branches); ``torn`` makes a line-writing point write half its line
    first. Each point is appended to ``trace``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.kill_at: int | tuple[str, int] | None = None
        self.seen: Counter = Counter()
        self.torn = False
        self.trace: list[str] = []
        self.marker: Path | None = None
        self.hit_at: tuple[int, int] = (0, 0)  # (index, occurrence of its label) of the kill
        #: seconds each checkpoint write takes longer (a slow disk; a writer thread that
        #: gets no CPU): how far the saved checkpoint may lag behind the run
        self.checkpoint_delay = 0.0
        #: code hashes whose evaluation counts as started twice already in processes that
        #: died (a reference run for a scenario that made the product skip them)
        self.presumed_dead: frozenset[str] = frozenset()

    def reset(self, kill_at: int | tuple[str, int] | None, torn: bool, marker: Path | None) -> None:
        self.count, self.kill_at, self.torn, self.trace, self.marker = 0, kill_at, torn, [], marker
        self.seen = Counter()
        self.hit_at = (0, 0)

    def check(self, label: str, tearable: bool = False) -> str | None:
        """``None``, ``"kill"`` (die after the work) or ``"tear"`` (write half, then die)."""
        with self.lock:
            self.count += 1
            self.trace.append(label)
            self.seen[label] += 1
            if isinstance(self.kill_at, tuple):
                hit = self.kill_at == (label, self.seen[label])
            else:
                hit = self.kill_at is not None and self.count == self.kill_at
            if not hit:
                return None
            self.hit_at = (self.count, self.seen[label])
        return "tear" if (tearable and self.torn) else "kill"

    def die(self, label: str, mode: str) -> None:
        if self.marker is not None:
            point, occurrence = self.hit_at
            self.marker.write_text(
                json.dumps({"point": point, "label": label, "occurrence": occurrence, "mode": mode})
            )
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)  # never reached

    def hit(self, label: str) -> None:
        """A point that is not a write: die here when selected."""
        if self.check(label) is not None:
            self.die(label, "kill")


POINTS = FaultPoints()
_INSTALLED = False


def install_hooks() -> None:
    """Patch the write paths and node wrappers of this process with fault points."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True

    import evoduet_graph.graphs.inner as inner_mod
    import evoduet_graph.graphs.outer as outer_mod
    from evoduet_graph.rundir.events import EventLog
    from evoduet_graph.search.database import SearchDatabase

    original_instrument = outer_mod.instrument

    def instrument(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        wrapped = original_instrument(name, fn)

        def entry(state: Any, runtime: Any) -> Any:
            POINTS.hit(f"enter:{name}")
            return wrapped(state, runtime)

        entry.__name__ = getattr(fn, "__name__", name)
        return entry

    outer_mod.instrument = instrument
    inner_mod.instrument = instrument

    original_emit = EventLog.emit

    def emit(self: EventLog, event: str, **fields: Any) -> dict[str, Any]:
        label = f"event:{event}" + (f":{fields['node']}" if event == "node" else "")
        action = POINTS.check(label, tearable=self.path is not None)
        if action == "tear":
            line = json.dumps({"event": event, "time": 0, **fields}, default=str)
            # under the log's lock, as a real write(2) is: no other thread's event may follow
            # the half line before the process dies (a kill tears only the file's last line)
            with self._lock, self.path.open("a", encoding="utf-8") as fh:  # type: ignore[union-attr]
                fh.write(line[: max(1, len(line) // 2)])
                fh.flush()
                POINTS.die(label, "torn")
        record = original_emit(self, event, **fields)
        if action == "kill":
            POINTS.die(label, "kill")
        return record

    EventLog.emit = emit  # type: ignore[method-assign]

    original_append = SearchDatabase._append

    def append(self: SearchDatabase, objs: list[dict[str, Any]]) -> None:
        if self.path is None or not objs:
            return original_append(self, objs)
        label = "dsearch:" + "+".join(sorted({str(o.get("type")) for o in objs}))
        action = POINTS.check(label, tearable=True)
        if action == "tear":
            payload = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(payload[: max(1, len(payload) // 2)])
            POINTS.die(label, "torn")
        original_append(self, objs)
        if action == "kill":
            POINTS.die(label, "kill")
        return None

    SearchDatabase._append = append  # type: ignore[method-assign]

    _install_store_hooks()


def _install_store_hooks() -> None:
    """Fault points on the program store's writes and the checkpoint writes (`install_hooks`)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from evoduet_graph.nodes.evaluate import MAX_EVALUATION_ATTEMPTS
    from evoduet_graph.rundir.store import ProgramStore, code_sha

    for method in ("put_program", "put_evaluation", "log_population_op", "save_population"):
        original = getattr(ProgramStore, method)

        def store_write(self: Any, *args: Any, _m: str = method, _o: Any = original) -> Any:
            out = _o(self, *args)
            POINTS.hit(f"store:{_m}")
            return out

        setattr(ProgramStore, method, store_write)

    original_start = ProgramStore.start_evaluation

    def start_evaluation(self: ProgramStore, code: str) -> int:
        sha = code_sha(code)
        if sha in POINTS.presumed_dead:  # as if two processes had died evaluating it
            with self._lock:
                self._conn.execute(
                    "INSERT OR IGNORE INTO eval_attempts (code_sha, attempts) VALUES (?, ?)",
                    (sha, MAX_EVALUATION_ATTEMPTS),
                )
        return original_start(self, code)

    ProgramStore.start_evaluation = start_evaluation  # type: ignore[method-assign]

    original_put = SqliteSaver.put

    def put(self: Any, *args: Any, **kwargs: Any) -> Any:
        if POINTS.checkpoint_delay:
            time.sleep(POINTS.checkpoint_delay)
        out = original_put(self, *args, **kwargs)
        POINTS.hit("ckpt")
        return out

    SqliteSaver.put = put  # type: ignore[method-assign]

    original_put_writes = SqliteSaver.put_writes

    def put_writes(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original_put_writes(self, *args, **kwargs)
        POINTS.hit("ckpt:writes")
        return out

    SqliteSaver.put_writes = put_writes  # type: ignore[method-assign]


# ------------------------------------------------------------------------------------------
# deterministic fakes
# ------------------------------------------------------------------------------------------


def _h(*parts: Any) -> int:
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:12], 16)


_RADIUS = re.compile(r"radius = ([-0-9.e]+)")
_SPREAD = re.compile(r"spread = ([^#\n]+?)\s*#")


def smoke_program(radius: float, spread: float) -> str:
    """The smoke task's initial program with these parameters."""
    code = (SMOKE_TASK / "initial_program.py").read_text()
    code = _RADIUS.sub(f"radius = {radius:.6f}", code, count=1)
    return _SPREAD.sub(f"spread = {spread:.6f}  #", code, count=1)


def parent_parameters(user_text: str) -> tuple[float, float]:
    """(radius, spread) of the parent program shown first in a generation prompt."""
    section = user_text.split("## Current program", 1)[-1]
    radius = float(_RADIUS.search(section).group(1))  # type: ignore[union-attr]
    spread_expr = _SPREAD.search(section).group(1).strip()  # type: ignore[union-attr]
    spread = float(eval(spread_expr, {"np": __import__("numpy")}))  # our own text
    return radius, spread


class HarnessModel(BaseChatModel):
    """Deterministic chat model: each answer is a function of the prompt.

    Deterministic chat model: each answer is a function of the prompt (and, for
    ``generate``, of the call's ``iteration`` / ``candidate_index`` metadata).

    Gate: ``retrieve`` while the search database is empty, then a prompt hash picks retrieve /
    look-up (the first two shown document ids) / no-op. Queries and predicted scores are
    hashes of the prompt and document ids. Generation rewrites the parent's radius / spread:
    candidate 0 grows the radius, 1 the spread, 2 leaves the unit disk (invalid), and in every
    third iteration candidate 1 answers prose without code (invalid).

    Attributes:
        salt: changes every hashed choice (another deterministic run).
        fail: optional ``(kind, messages) -> Exception | None`` to inject model faults.
    """

    salt: str = "evoduet"
    fail: Any = None
    _calls: Counter = PrivateAttr(default_factory=Counter)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "harness-fake"

    @property
    def calls(self) -> Counter:
        return Counter(self._calls)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        kind = prompt_kind(messages)
        with self._lock:
            self._calls[kind] += 1
        POINTS.hit(f"llm:{kind}")
        if self.fail is not None:
            exc = self.fail(kind, messages)
            if exc is not None:
                raise exc
        metadata = dict(run_manager.metadata) if run_manager is not None else {}
        text = self.answer(kind, messages, metadata)
        chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": chars // 4 + 1,
            "output_tokens": len(text) // 4 + 1,
            "total_tokens": chars // 4 + len(text) // 4 + 2,
        }
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=text, usage_metadata=usage))]
        )

    def answer(self, kind: str, messages: list[BaseMessage], metadata: dict[str, Any]) -> str:
        text = prompt_text(messages)
        if kind == "gate":
            database = text.split("## Search database", 1)[-1].split("## Knowledge state", 1)[0]
            ids = sorted(set(re.findall(r"doc_\d{6}", database)))
            if not ids:
                decision = "retrieve"
            else:
                decision = ("retrieve", "look-up", "no-op")[_h(self.salt, "gate", text) % 3]
            return json.dumps(
                {
                    "known": "hull area grows with radius and spread",
                    "established": f"{len(ids)} documents seen",
                    "unresolved": "how to place the points",
                    "decision": decision,
                    "reasoning": "harness",
                    "document_ids": ids[:2] if decision == "look-up" else [],
                }
            )
        if kind == "construct_query":
            return json.dumps({"queries": [f"polygon area idea {_h(self.salt, text) % 997}"]})
        if kind == "hypothetical_score":
            scores = [
                {"doc_id": d, "predicted_score": 0.2 + (_h(self.salt, d) % 60) / 100}
                for d, _title, _url in scored_documents(text)
            ]
            return json.dumps(
                {"scores": scores, "known": "k", "established": "e", "unresolved": "gap"}
            )
        iteration = int(metadata.get("iteration", 0))
        index = int(metadata.get("candidate_index", 0))
        radius, spread = parent_parameters(str(messages[-1].content))
        if index == 1 and iteration % 3 == 0:
            return "I would rather describe the idea in words than write code."
        if index == 0:
            radius = min(1.0, radius + 0.05 + 0.01 * (_h(self.salt, iteration) % 3))
        elif index == 1:
            spread = min(2 * math.pi, spread + 0.5)
        elif index == 2:
            radius = 1.5
        else:
            radius = min(1.0, radius + 0.01 * index)
            spread = min(2 * math.pi, spread + 0.1 * index)
        return f"```python\n{smoke_program(radius, spread)}```"


class InProcessEvaluator:
    """The task's own ``evaluate`` run in this process (fast; for harness runs only).

    Fault point ``eval:start`` fires before the evaluation; metrics follow the sandbox's rules
    (numeric metrics, ``combined_score``; a text ``error`` makes the outcome invalid).
    """

    def __init__(self, task_dir: Path = SMOKE_TASK, workers: int = 2) -> None:
        spec = importlib.util.spec_from_file_location(
            f"harness_eval_{os.getpid()}", task_dir / "evaluator.py"
        )
        assert spec is not None and spec.loader is not None
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        self.workers = workers

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        POINTS.hit("eval:start")
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="evoduet_harness_") as tmp:
            path = Path(tmp) / "program.py"
            path.write_text(code)
            try:
                raw = self.module.evaluate(str(path))
            except Exception as exc:  # noqa: BLE001 - a candidate fault
                return EvaluationOutcome(
                    error=f"{type(exc).__name__}: {exc}", elapsed_s=time.monotonic() - start
                )
        metrics = {
            k: float(v) for k, v in raw.items() if isinstance(v, int | float) and k != "error"
        }
        score = score_from_metrics(metrics)
        if isinstance(raw.get("error"), str) or score is None:
            return EvaluationOutcome(
                metrics=metrics,
                error=str(raw.get("error") or "no score"),
                elapsed_s=time.monotonic() - start,
            )
        return EvaluationOutcome(
            metrics=metrics, score=score, valid=True, elapsed_s=time.monotonic() - start
        )

    def evaluate_many(self, codes: Any, ids: Any = None) -> list[EvaluationOutcome]:
        ids = list(ids) if ids is not None else [f"c{i}" for i in range(len(codes))]
        return [self.evaluate(c, i) for c, i in zip(codes, ids, strict=True)]


class SandboxHarnessEvaluator:
    """The real `SandboxEvaluator` behind the ``eval:start`` fault point.

    The real `SandboxEvaluator` (child processes; read-only filesystem where bwrap works)
    behind the ``eval:start`` fault point: what a real run evaluates with (slower).
    """

    def __init__(self, task_dir: Path = SMOKE_TASK, workers: int = 2) -> None:
        from evoduet_graph.evaluation import SandboxEvaluator

        self.inner = SandboxEvaluator(load_task(task_dir), workers=workers, timeout_s=60)
        self.workers = workers

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        POINTS.hit("eval:start")
        return self.inner.evaluate(code, program_id)

    def evaluate_many(self, codes: Any, ids: Any = None) -> list[EvaluationOutcome]:
        ids = list(ids) if ids is not None else [f"c{i}" for i in range(len(codes))]
        return [self.evaluate(c, i) for c, i in zip(codes, ids, strict=True)]


#: Environment variable choosing the harness runs' evaluator: ``inprocess`` (default, fast) or
#: ``sandbox`` (`SandboxHarnessEvaluator`; the soak and the fault report use it).
HARNESS_EVALUATOR_ENV = "EVODUET_HARNESS_EVALUATOR"


def harness_evaluator() -> Any:
    """The evaluator a harness run uses (`HARNESS_EVALUATOR_ENV`)."""
    if os.environ.get(HARNESS_EVALUATOR_ENV, "inprocess") == "sandbox":
        return SandboxHarnessEvaluator()
    return InProcessEvaluator()


class HookedCountingEvaluator(CountingEvaluator):
    """`CountingEvaluator` with an ``eval:end`` fault point after each logged evaluation."""

    @property
    def workers(self) -> int:
        return int(getattr(self.inner, "workers", 1))

    def evaluate(self, code: str, program_id: str = "candidate") -> EvaluationOutcome:
        out = super().evaluate(code, program_id)
        POINTS.hit("eval:end")
        return out


class HookedSearcher(FakeSearcher):
    """`FakeSearcher` (results depend only on the query) with a ``search`` fault point."""

    def search(self, query: str, max_results: int) -> list[Any]:
        POINTS.hit("search")
        return super().search(query, max_results)


# ------------------------------------------------------------------------------------------
# one run in a forked child
# ------------------------------------------------------------------------------------------

EVAL_LOG = "evaluations.log"  # lives next to the run directory, not inside it


def run_child(
    run_dir: Path,
    *,
    resume: bool,
    kill_at: int | tuple[str, int] | None = None,
    torn: bool = False,
    marker: Path | None = None,
    trace_out: Path | None = None,
    result_out: Path | None = None,
    config: dict[str, Any] | None = None,
    salt: str = "evoduet",
    checkpoint_delay: float = 0.0,
    presumed_dead: frozenset[str] = frozenset(),
) -> None:
    """Body of a forked child: run or resume, possibly dying at ``kill_at``.

    ``checkpoint_delay`` slows every checkpoint write by that many seconds;
    ``presumed_dead`` code hashes count as evaluations two earlier processes died in.
    """
    from evoduet_graph.api import run
    from evoduet_graph.config import load_config

    install_hooks()
    POINTS.reset(kill_at, torn, marker)
    POINTS.checkpoint_delay = checkpoint_delay
    POINTS.presumed_dead = frozenset(presumed_dead)
    task = load_task(SMOKE_TASK)
    llm = HarnessModel(salt=salt)
    evaluator = HookedCountingEvaluator(harness_evaluator(), run_dir.parent / EVAL_LOG)
    searcher = HookedSearcher()
    if resume and (run_dir / "config.yaml").exists():
        cfg = load_config(run_dir / "config.yaml")
    else:
        cfg = EvoDuetConfig.model_validate(config or HARNESS_CONFIG)
    result = run(task, cfg, llm=llm, evaluator=evaluator, run_dir=run_dir, searcher=searcher)
    if trace_out is not None:
        trace_out.write_text(json.dumps(POINTS.trace))
    if result_out is not None:
        result_out.write_text(
            json.dumps(
                {
                    "best_id": result.best_id,
                    "best_score": result.best_score,
                    "iterations": result.iterations,
                    "stop_reason": result.stop_reason,
                    "points": POINTS.count,
                }
            )
        )


def fork_run(target: Any = None, /, *args: Any, **kwargs: Any) -> int:
    """Run ``target(*args, **kwargs)`` (default `run_child`) in a forked child.

    Return its wait status (``-signal`` or exit code; 3 when it raised).
    """
    target = run_child if target is None else target
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            target(*args, **kwargs)
        except BaseException:  # noqa: BLE001 - report and exit non-zero
            import traceback

            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


# ------------------------------------------------------------------------------------------
# reading a finished run back
# ------------------------------------------------------------------------------------------


def _sqlite_rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def persisted_evaluations(run_dir: Path) -> set[str]:
    """Code hashes whose evaluation is in the program store."""
    path = run_dir / "programs.sqlite"
    if not path.exists():
        return set()
    try:
        return {r[0] for r in _sqlite_rows(path, "SELECT code_sha FROM evaluations")}
    except sqlite3.Error:
        return set()


def _restored_population(db: Path) -> dict[str, Any]:
    """The population a resume would rebuild (snapshot + journal), as data."""
    from evoduet_graph.config import EvoDuetConfig
    from evoduet_graph.population import restore_population
    from evoduet_graph.rundir.store import ProgramStore
    from evoduet_graph.startup import checked_config

    cfg = checked_config(EvoDuetConfig.model_validate(HARNESS_CONFIG))
    store = ProgramStore(db)
    try:
        population, _ = restore_population(store, cfg.population, seed=cfg.seed)
        return population.to_dict()
    finally:
        store.close()


def snapshot(run_dir: Path) -> dict[str, Any]:
    """What must equal between a killed-and-resumed run and the reference."""
    db = run_dir / "programs.sqlite"
    programs = {
        r[0]: [r[1], r[2], None if r[3] is None else round(r[3], 12), r[4]]
        for r in _sqlite_rows(db, "SELECT id, code_sha, status, score, valid FROM programs")
    }
    population = _restored_population(db)
    best = json.loads((run_dir / "best_program.json").read_text())
    docs, records, impacts = {}, {}, set()
    for line in (run_dir / "search_database.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if obj["type"] == "document":
            docs[obj["doc_id"]] = obj["url"]
        elif obj["type"] == "record":
            records[obj["record_id"]] = [
                obj["final_doc_ids"],
                [r["queries"] for r in obj["rounds"]],
            ]
        elif obj["type"] == "impact":
            impacts.add((obj["record_id"], obj["iteration"], obj["outcome"]))
    return {
        "programs": programs,
        "population": population,
        "best": {k: best.get(k) for k in ("id", "score", "iteration")},
        "documents": docs,
        "records": records,
        "impacts": sorted(impacts),
    }


def file_problems(run_dir: Path) -> list[str]:
    """Torn or duplicate lines in ``search_database.jsonl``; unreadable ``events.jsonl`` lines."""
    problems: list[str] = []
    path = run_dir / "search_database.jsonl"
    data = path.read_bytes() if path.exists() else b""
    if data and not data.endswith(b"\n"):
        problems.append("search_database.jsonl does not end with a newline (torn tail)")
    seen_docs: set[str] = set()
    seen_urls: set[str] = set()
    seen_records: set[str] = set()
    seen_impacts: set[tuple[str, int]] = set()
    seen_scores: set[str] = set()
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            obj = json.loads(raw)
        except ValueError:
            problems.append(f"search_database.jsonl line {n} is not JSON (half-written)")
            continue
        kind = obj.get("type")
        key: Any
        if kind == "document":
            if obj["doc_id"] in seen_docs or obj["url"] in seen_urls:
                problems.append(f"duplicate document {obj['doc_id']} / {obj['url']}")
            seen_docs.add(obj["doc_id"])
            seen_urls.add(obj["url"])
        elif kind == "record":
            if obj["record_id"] in seen_records:
                problems.append(f"duplicate record {obj['record_id']}")
            seen_records.add(obj["record_id"])
        elif kind == "impact":
            key = (obj["record_id"], obj["iteration"])
            if key in seen_impacts:
                problems.append(f"duplicate impact {key}")
            seen_impacts.add(key)
        elif kind == "score":
            if obj["doc_id"] in seen_scores:
                problems.append(f"duplicate predicted score for {obj['doc_id']}")
            seen_scores.add(obj["doc_id"])
    events = run_dir / "events.jsonl"
    for n, raw in enumerate(events.read_bytes().splitlines(), 1):
        try:
            readable = isinstance(json.loads(raw), dict)
        except ValueError:
            readable = False
        if not readable:
            problems.append(f"events.jsonl line {n} is unreadable")
    return problems


def evaluation_counts(scenario_dir: Path) -> Counter:
    log = scenario_dir / EVAL_LOG
    if not log.exists():
        return Counter()
    return Counter(json.loads(line)["sha"] for line in log.read_text().splitlines() if line)


# ------------------------------------------------------------------------------------------
# scenarios
# ------------------------------------------------------------------------------------------


KillAt = int | tuple[str, int]
"""A kill point: the n-th fault point of the process (1-based), or ``(label, k)``, the k-th
point with that label (stable under the thread interleaving of parallel branches)."""


def format_kill(kill: tuple[str, int]) -> str:
    """``LABEL@K``, the form ``--kill`` / ``--then`` read."""
    return f"{kill[0]}@{kill[1]}"


def parse_kill(text: str) -> tuple[str, int]:
    """Read ``LABEL@K`` (``store:put_evaluation@3``; ``@K`` omitted: the first).

    Raises:
        argparse.ArgumentTypeError: ``K`` is not a positive integer or the label is empty.
    """
    label, _, k = text.rpartition("@") if "@" in text else (text, "@", "1")
    if not label or not k.isdigit() or int(k) < 1:
        raise argparse.ArgumentTypeError(f"expected LABEL@K with K >= 1, got {text!r}")
    return label, int(k)


@dataclass
class Scenario:
    """One kill point: where the run died and what was checked after resuming it.

    ``label`` / ``occurrence`` name the point the run died at (the ``occurrence``-th point
    with that label), ``second_label`` / ``second_occurrence`` the point its first resume
    died at (double kills); ``replay`` is the command that runs exactly this scenario alone.
    """

    point: int
    torn: bool
    second: int | None = None
    second_label: str = ""
    label: str = ""
    mode: str = ""
    killed: bool = False
    resumed: bool = False
    problems: list[str] = field(default_factory=list)
    reevaluated_in_flight: int = 0
    lost_programs: int = 0
    seconds: float = 0.0
    skipped_by_policy: int = 0
    in_flight_at_both_kills: int = 0
    occurrence: int = 0
    second_occurrence: int = 0
    salt: str = "evoduet"
    replay: str = ""

    @property
    def ok(self) -> bool:
        return self.killed and self.resumed and not self.problems

    def replay_command(self) -> str:
        """The command line that runs this scenario alone (same kill points, salt, evaluator)."""
        if not self.label:
            return ""
        env = os.environ.get(HARNESS_EVALUATOR_ENV)
        parts = [f"{HARNESS_EVALUATOR_ENV}={env}"] if env else []
        parts += ["python -m tests.fault_harness", f"--salt {self.salt}"]
        parts.append(f"--kill '{format_kill((self.label, self.occurrence))}'")
        if self.torn:
            parts.append("--torn")
        if self.second_label:
            parts.append(f"--then '{format_kill((self.second_label, self.second_occurrence))}'")
        return " ".join(parts)


def reference_run(
    workdir: Path, salt: str = "evoduet", presumed_dead: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], list[str]]:
    """The uninterrupted run: its snapshot and the trace of fault-point labels.

    With ``presumed_dead``: the uninterrupted run in which those programs count as having
    been in flight at two deaths already (the product skips them, `_skipped_by_policy`).
    """
    name = "reference"
    if presumed_dead:
        name += (
            "-skipping-" + hashlib.sha256("".join(sorted(presumed_dead)).encode()).hexdigest()[:8]
        )
    ref = workdir / name
    shutil.rmtree(ref, ignore_errors=True)
    ref.mkdir(parents=True)
    status = fork_run(
        run_dir=ref / "run",
        resume=False,
        trace_out=ref / "trace.json",
        result_out=ref / "result.json",
        salt=salt,
        presumed_dead=presumed_dead,
    )
    if status != 0:
        raise RuntimeError(f"the reference run failed (status {status})")
    problems = file_problems(ref / "run")
    if problems:
        raise RuntimeError(f"the reference run's files are damaged: {problems}")
    counts = evaluation_counts(ref)
    if any(n > 1 for n in counts.values()):
        raise RuntimeError(f"the reference run evaluated a program twice: {counts}")
    return snapshot(ref / "run"), json.loads((ref / "trace.json").read_text())


def category(label: str) -> str:
    """The kind of a fault point.

    The kind of a fault point (``enter:gate`` → ``enter:gate``; ``event:node:x`` →
    ``event:node``; ``dsearch:document`` → ``dsearch``).
    """
    parts = label.split(":")
    if parts[0] in ("dsearch", "store"):
        return parts[0] if parts[0] == "dsearch" else label
    return ":".join(parts[:2])


def _spread_order(k: int) -> list[int]:
    """Indices ``0..k-1`` in an order that spreads them: middle, quarters, eighths, ..."""
    order: list[int] = []
    seen: set[int] = set()
    denom = 1
    while len(order) < k and denom <= 4 * k:
        for num in range(1, 2 * denom, 2):
            i = min(k - 1, num * k // (2 * denom))
            if i not in seen:
                seen.add(i)
                order.append(i)
        denom *= 2
    order += [i for i in range(k) if i not in seen]
    return order


def canonical_trace(trace: list[str]) -> list[str]:
    """The trace in one order for every run of a salt: each graph step's labels sorted.

    The raw order of a run's fault points depends on how the threads of a step (parallel
    ``generate`` branches, evaluation workers) interleave, so an index into it names another
    point in another run. Steps end with their checkpoint write (``ckpt``; a run saves each
    step's checkpoint before the next step starts), and what a step does is deterministic,
    so sorting the labels between two ``ckpt`` points gives one order for every run. A task's
    saved writes (``ckpt:writes``) are written in the background and land before or after the
    next steps' points, so they are not placed by time: the k-th follows the k-th ``ckpt``
    (their number is fixed; a kill at one is named by its ``k`` anyway).
    """
    writes = trace.count("ckpt:writes")
    out: list[str] = []
    step: list[str] = []
    for label in trace:
        if label == "ckpt:writes":
            continue
        if label == "ckpt":
            out += [*sorted(step), "ckpt"]
            step = []
            if writes:
                out.append("ckpt:writes")
                writes -= 1
        else:
            step.append(label)
    return out + sorted(step) + ["ckpt:writes"] * writes


def second_kill(trace: list[str], point: int) -> tuple[str, int]:
    """Where a double-kill scenario kills its first resume: ``(label, k)``.

    A later point of the (canonical) ``trace`` than ``point``, spread by a fixed stride; ``k``
    counts that label from ``point`` on (the resume redoes the killed step, so it meets the
    label at least that often before it gets there).
    """
    later = (point * 7) % max(1, len(trace) - point) + 1
    index = min(len(trace), point + later)
    label = trace[index - 1]
    return label, max(1, trace[point:index].count(label))


def choose_points(trace: list[str], count: int) -> list[tuple[int, bool]]:
    """``count`` kill points ``(1-based index, torn)`` covering every category of point.

    round-robin over the categories (in order of first appearance), each category's occurrences
    taken in a spreading order; about every second pick of a line-writing category tears its line.
    """
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(trace, 1):
        by_cat[category(label)].append(i)
    orders = {cat: _spread_order(len(occ)) for cat, occ in by_cat.items()}
    chosen: list[tuple[int, bool]] = []
    rnd = 0
    while len(chosen) < count and any(rnd < len(o) for o in orders.values()):
        for n, (cat, occ) in enumerate(by_cat.items()):
            if rnd < len(orders[cat]):
                torn = cat.startswith(("event", "dsearch")) and (rnd + n) % 2 == 1
                chosen.append((occ[orders[cat][rnd]], torn))
                if len(chosen) >= count:
                    break
        rnd += 1
    return sorted(set(chosen))


def started_evaluations(run_dir: Path) -> set[str]:
    """Code hashes whose evaluation some process has started (``eval_attempts``)."""
    path = run_dir / "programs.sqlite"
    if not path.exists():
        return set()
    try:
        return {r[0] for r in _sqlite_rows(path, "SELECT code_sha FROM eval_attempts")}
    except sqlite3.Error:
        return set()


def skipped_evaluations(run_dir: Path) -> set[str]:
    """Code hashes the product recorded as skipped (its evaluation killed the run too often)."""
    rows = _sqlite_rows(run_dir / "programs.sqlite", "SELECT code_sha, outcome FROM evaluations")
    return {
        sha
        for sha, outcome in rows
        if (json.loads(outcome).get("error") or "").startswith("skipped:")
    }


def _skipped_by_policy(
    result: Scenario, run_dir: Path, in_flight_at_kill: list[set[str]]
) -> frozenset[str]:
    """The programs the resumed run skipped as its policy requires, checked.

    The product skips a program whose evaluation was in flight when `MAX_EVALUATION_ATTEMPTS`
    processes died (it cannot tell a kill from outside from a candidate that kills the run:
    `evoduet_graph.nodes.evaluate`). A double kill whose two kills both land while the same
    program is evaluated therefore *must* end with that program skipped, and its result is
    the uninterrupted run's in which that program is skipped, not the plain reference. A skip
    without that cause is a problem.
    """
    from evoduet_graph.nodes.evaluate import MAX_EVALUATION_ATTEMPTS

    skipped = skipped_evaluations(run_dir)
    for sha in sorted(skipped):
        deaths = sum(sha in flight for flight in in_flight_at_kill)
        if deaths < MAX_EVALUATION_ATTEMPTS:
            result.problems.append(
                f"program {sha[:12]} skipped but in flight at only {deaths} of the kills"
            )
    return frozenset(skipped)


def _check_resumed(
    result: Scenario,
    sdir: Path,
    run_dir: Path,
    counts_at_kill: list[Counter],
    persisted_at_kill: list[set[str]],
    reference: dict[str, Any],
    in_flight_at_kill: list[set[str]] | None = None,
    reference_for: Callable[[frozenset[str]], dict[str, Any]] | None = None,
) -> None:
    """Compare a finished resumed run with the kills it survived and the reference run.

    Adds to ``result.problems`` (a persisted evaluation run again, a program evaluated more
    often than the kills explain, broken files, a difference from ``reference``) and counts
    the evaluations of work in flight that ran again and the programs lost. Programs the
    product skipped by its policy (`_skipped_by_policy`, with the evaluations in flight at
    each kill) are compared with ``reference_for(skipped)`` instead.
    """
    final = evaluation_counts(sdir)
    kills = len(counts_at_kill)
    for sha, n in final.items():
        for before, done in zip(counts_at_kill, persisted_at_kill, strict=True):
            if sha in done and n > before.get(sha, 0):
                result.problems.append(f"persisted evaluation {sha[:12]} ran again after resume")
        if n > 1 + kills:
            result.problems.append(f"program {sha[:12]} evaluated {n} times")
        elif n > 1:
            result.reevaluated_in_flight += n - 1
    result.problems += file_problems(run_dir)
    try:
        got = snapshot(run_dir)
        skipped = _skipped_by_policy(result, run_dir, in_flight_at_kill or [])
    except (OSError, ValueError, sqlite3.Error) as exc:
        result.problems.append(f"cannot read the resumed run: {exc}")
        return
    result.skipped_by_policy = len(skipped)
    if skipped and reference_for is not None:
        reference = reference_for(skipped)
    missing = set(reference["programs"]) - set(got["programs"])
    result.lost_programs = len(missing)
    for key, expected in reference.items():
        if got[key] != expected:
            result.problems.append(f"{key} differs from the uninterrupted run")


def _slug(kill: KillAt) -> str:
    """A folder-name form of a kill point."""
    return f"{kill:05d}" if isinstance(kill, int) else re.sub(r"\W+", "_", format_kill(kill))


def run_scenario(
    workdir: Path,
    point: int,
    torn: bool,
    reference: dict[str, Any],
    salt: str = "evoduet",
    second: KillAt | None = None,
    trace: list[str] | None = None,
    kill_at: tuple[str, int] | None = None,
    keep: bool = False,
    checkpoint_delay: float = 0.0,
) -> Scenario:
    """Kill a fresh run at ``point``, resume until done, compare with ``reference``.

    Kill a fresh run at ``point`` (with the reference ``trace``: at the same occurrence of
    the same label as the reference's ``point``-th point; ``kill_at``: at that
    ``(label, k)`` instead); with ``second``, kill the first resume too at that point; resume
    until done; compare with ``reference``. A passed scenario's folder is removed unless
    ``keep``. ``checkpoint_delay`` slows the killed run's checkpoint writes (`FaultPoints`).
    """
    start = time.monotonic()
    target: KillAt = point
    if kill_at is not None:
        target = kill_at
    elif trace is not None:
        target = (trace[point - 1], trace[:point].count(trace[point - 1]))
    then = "" if second is None else f"-then-{_slug(second)}"
    sdir = workdir / f"kill-{_slug(target)}{'-torn' if torn else ''}{then}"
    shutil.rmtree(sdir, ignore_errors=True)
    sdir.mkdir(parents=True)
    result = Scenario(
        point=point, torn=torn, second=second if isinstance(second, int) else None, salt=salt
    )
    run_dir = sdir / "run"

    def finish() -> Scenario:
        result.seconds = time.monotonic() - start
        result.replay = result.replay_command()
        return result

    marker = sdir / "killed.json"
    status = fork_run(
        run_dir=run_dir,
        resume=False,
        kill_at=target,
        torn=torn,
        marker=marker,
        salt=salt,
        checkpoint_delay=checkpoint_delay,
    )
    result.killed = status == -signal.SIGKILL and marker.exists()
    if marker.exists():
        info = json.loads(marker.read_text())
        result.label, result.mode = info["label"], info["mode"]
        result.occurrence = info["occurrence"]
    if not result.killed:
        result.problems.append(f"the run was not killed at {target} (status {status})")
        return finish()
    # evaluations persisted at each kill must never run again; others may (work in flight)
    persisted = persisted_evaluations(run_dir)
    counts_at_kill = [evaluation_counts(sdir)]
    persisted_at_kill = [persisted]
    in_flight_at_kill = [started_evaluations(run_dir) - persisted]
    finished = False
    if second is not None:
        marker2 = sdir / "killed2.json"
        status = fork_run(run_dir=run_dir, resume=True, kill_at=second, marker=marker2, salt=salt)
        if status == 0:
            finished = True  # the resumed run finished before its kill point
        elif status == -signal.SIGKILL and marker2.exists():
            info = json.loads(marker2.read_text())
            result.second_label, result.second_occurrence = info["label"], info["occurrence"]
            counts_at_kill.append(evaluation_counts(sdir))
            persisted_at_kill.append(persisted_evaluations(run_dir))
            in_flight_at_kill.append(started_evaluations(run_dir) - persisted_at_kill[-1])
        else:
            result.problems.append(f"the first resume failed (status {status})")
            return finish()
    if not finished:
        status = fork_run(run_dir=run_dir, resume=True, result_out=sdir / "result.json", salt=salt)
        if status != 0:
            result.problems.append(f"the resumed run failed (status {status})")
            return finish()
    result.resumed = True
    result.in_flight_at_both_kills = len(set.intersection(*in_flight_at_kill))

    def reference_for(skipped: frozenset[str]) -> dict[str, Any]:
        return reference_run(sdir, salt, presumed_dead=skipped)[0]

    _check_resumed(
        result,
        sdir,
        run_dir,
        counts_at_kill,
        persisted_at_kill,
        reference,
        in_flight_at_kill,
        reference_for,
    )
    finish()
    if result.ok and not keep:
        shutil.rmtree(sdir, ignore_errors=True)
    return result


def run_kill_points(
    workdir: Path, count: int, jobs: int = 2, salt: str = "evoduet", double_every: int = 0
) -> dict[str, Any]:
    """Reference run, then ``count`` kill scenarios.

    Reference run, then ``count`` kill scenarios (``jobs`` at a time, each in its own
    forked worker); with ``double_every=k``, every k-th scenario also kills its first resume.
    The scenarios are chosen on the `canonical_trace` as ``(label, k)`` kill points (both
    kills), so one ``count`` / ``salt`` / ``double_every`` always runs the same scenarios.
    Returns a JSON-ready summary; each failed scenario carries its ``replay`` command.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    reference, raw_trace = reference_run(workdir, salt)
    trace = canonical_trace(raw_trace)  # the same scenarios in every invocation
    points = choose_points(trace, count)
    results: list[Scenario] = []
    running: dict[int, Path] = {}
    queue = [
        (
            point,
            torn,
            second_kill(trace, point)
            if double_every and n % double_every == double_every - 1
            else None,
        )
        for n, (point, torn) in enumerate(points)
    ]
    while queue or running:
        while queue and len(running) < max(1, jobs):
            point, torn, second = queue.pop(0)
            out = workdir / f"scenario-{point}-{int(torn)}.json"
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    res = run_scenario(workdir, point, torn, reference, salt, second, trace)
                    out.write_text(json.dumps(asdict(res)))
                except BaseException:  # noqa: BLE001
                    import traceback

                    traceback.print_exc()
                    code = 3
                finally:
                    os._exit(code)
            running[pid] = out
        pid, _status = os.wait()
        out = running.pop(pid)
        if out.exists():
            results.append(Scenario(**json.loads(out.read_text())))
            out.unlink()
        else:
            results.append(Scenario(point=-1, torn=False, problems=[f"worker {pid} crashed"]))
    by_cat = Counter(category(r.label) for r in results if r.label)
    return {
        "trace_points": len(trace),
        "categories_in_trace": sorted({category(x) for x in trace}),
        "kill_points": len(results),
        "killed_at_categories": dict(sorted(by_cat.items())),
        "torn_writes": sum(r.mode == "torn" for r in results),
        "double_kills": sum(bool(r.second_label) for r in results),
        "passed": sum(r.ok for r in results),
        "failed": [asdict(r) for r in results if not r.ok],
        "reevaluated_in_flight": sum(r.reevaluated_in_flight for r in results),
        "lost_programs": sum(r.lost_programs for r in results),
        "skipped_by_policy": sum(r.skipped_by_policy for r in results),
        "seconds": round(time.monotonic() - t0, 1),
        "scenarios": [
            {
                "point": r.point,
                "label": r.label,
                "occurrence": r.occurrence,
                "mode": r.mode,
                "ok": r.ok,
                "seconds": round(r.seconds, 2),
            }
            for r in sorted(results, key=lambda r: (r.point, r.torn))
        ],
    }


def replay_scenario(
    workdir: Path,
    kill: tuple[str, int],
    torn: bool = False,
    then: tuple[str, int] | None = None,
    salt: str = "evoduet",
    repeat: int = 1,
    keep: bool = False,
    checkpoint_delay: float = 0.0,
) -> dict[str, Any]:
    """Run one named scenario ``repeat`` times against one reference run.

    Kill at ``kill`` (``(label, k)``), tearing the line when ``torn``, kill the first resume
    at ``then`` too; what a failed scenario's ``replay`` command runs. The scenario runs one
    at a time (a kill depends on timing only through what the other threads of the killed
    process had done, so repeating it samples those interleavings). Returns a JSON-ready
    summary: runs, passed, the distinct problems with their counts, the failed runs.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    reference, _trace = reference_run(workdir, salt)
    results: list[Scenario] = []
    for n in range(repeat):
        rdir = workdir / f"replay-{n:04d}"
        res = run_scenario(
            rdir,
            0,
            torn,
            reference,
            salt,
            then,
            kill_at=kill,
            keep=keep,
            checkpoint_delay=checkpoint_delay,
        )
        results.append(res)
        if res.ok and not keep:
            shutil.rmtree(rdir, ignore_errors=True)
    problems = Counter(p for r in results for p in r.problems)
    return {
        "scenario": results[0].replay if results and results[0].replay else format_kill(kill),
        "runs": len(results),
        "passed": sum(r.ok for r in results),
        "double_kills": sum(bool(r.second_label) for r in results),
        "problems": dict(problems.most_common()),
        "lost_programs": sum(r.lost_programs for r in results),
        "skipped_by_policy": sum(r.skipped_by_policy for r in results),
        "failed": [{"run": n, **asdict(r)} for n, r in enumerate(results) if not r.ok],
        "seconds": round(time.monotonic() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=24, help="kill points to run")
    parser.add_argument("--jobs", type=int, default=2, help="scenarios at a time")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: temp)")
    parser.add_argument("--salt", default="evoduet", help="another deterministic run")
    parser.add_argument(
        "--double-every", type=int, default=0, help="every k-th scenario kills its resume too"
    )
    one = parser.add_argument_group(
        "one scenario (what a failed scenario's 'replay' field prints)",
        "Run only the scenario killed at --kill, instead of --points chosen ones.",
    )
    one.add_argument(
        "--kill",
        type=parse_kill,
        metavar="LABEL@K",
        help="die at the K-th fault point labelled LABEL (e.g. store:put_evaluation@3)",
    )
    one.add_argument("--torn", action="store_true", help="tear the line written at --kill")
    one.add_argument(
        "--then", type=parse_kill, metavar="LABEL@K", help="kill the first resume there too"
    )
    one.add_argument("--repeat", type=int, default=1, help="run the scenario this many times")
    one.add_argument("--keep", action="store_true", help="keep passed scenarios' run folders")
    one.add_argument(
        "--checkpoint-delay",
        type=float,
        default=0.0,
        metavar="S",
        help="slow each checkpoint write of the killed run by S seconds (a lagging writer)",
    )
    args = parser.parse_args(argv)
    if args.kill is None and (
        args.torn or args.then or args.repeat != 1 or args.keep or args.checkpoint_delay
    ):
        parser.error("--torn, --then, --repeat, --keep and --checkpoint-delay need --kill")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    workdir = args.out or Path(tempfile.mkdtemp(prefix="evoduet_kill_"))
    if args.kill is not None:
        summary = replay_scenario(
            workdir,
            args.kill,
            args.torn,
            args.then,
            args.salt,
            args.repeat,
            args.keep,
            args.checkpoint_delay,
        )
    else:
        summary = run_kill_points(workdir, args.points, args.jobs, args.salt, args.double_every)
    summary["workdir"] = str(workdir)
    print(json.dumps(summary))
    return 0 if not summary["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
