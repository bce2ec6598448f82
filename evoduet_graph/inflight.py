"""Iterations in flight (``max_iterations_in_flight`` = k > 1).

With a hosted model every call takes seconds and an EvoDuet iteration makes several calls in
sequence, while the endpoint could answer many at once. With k > 1 the outer loop runs up to k
iterations at the same time, each with its own parent, gate decision, knowledge state, inner
loop, candidates and evaluation, and records each one when it finishes::

    initialize → dispatch ─→ collect ─→ record ─→ dispatch … (END when nothing is in flight)
                   │  starts each iteration: select here, then the *iteration graph*
                   │  (gate → look_up | query_evolution → generate ×N → evaluate) in a worker thread
                   └─ on a snapshot of the population

Why this shape, not a ``Send`` fan-out. A ``Send`` per iteration runs the k iterations as the
tasks of one superstep, and LangGraph's supersteps are bulk-synchronous: the next step (and
the next iteration) starts only when the slowest of the k has finished, so an iteration is
not recorded when *it* finishes and a retrieve iteration (7 calls) holds up three no-op ones
(2 calls). Here the k iterations run outside the superstep in a thread pool owned by the run
(`IterationPool`, on ``Context.inflight``); the graph itself advances one finished iteration
per ``collect → record`` pair, so:

* every finished iteration is committed by the unchanged ``record`` node (population,
  D_search Δ credit, best program, stop rules) in its own superstep, and its checkpoint is
  written before the next iteration is collected ("recorded when it finishes");
* the graph state lists the iterations in flight (``in_flight``); after a kill, ``dispatch``
  starts those again under the same numbers (the work they had done is what the kill loses),
  and nothing recorded is recorded twice (``record`` stays idempotent, as at k = 1);
* ``select`` runs in ``dispatch`` on the graph's own thread, so parent selection never races
  the population updates of ``record``; each started iteration gets a copy of the population
  as it stood (`evoduet_graph.nodes.dispatch.snapshot_population`), as OpenEvolve's
  controller hands each submitted iteration a database snapshot
  (``openevolve/process_parallel.py``, ``ProcessParallelController._submit_iteration``), so
  ``generate``'s inspirations and novelty check read a consistent population;
* Studio draws ``dispatch`` and ``collect`` in the outer graph next to the per-iteration nodes
  they run; every node of an in-flight iteration writes its usual ``node`` event (with its
  iteration number) and its live progress is forwarded by ``collect`` to the run's custom
  stream. The iteration graph is compiled without a checkpointer: an in-flight iteration is
  not resumed mid-way, it is started again.

k = 1 never reaches ``dispatch``: the loop is the sequential select → … → record, with the
events and records it always had.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = [
    "BOOKKEEPING_KEYS",
    "ITERATION_DEFAULTS",
    "IterationPool",
    "iteration_payload",
]

ITERATION_DEFAULTS: dict[str, Any] = {
    "iteration": 0,
    "parent_id": None,
    "inspiration_ids": [],
    "island": None,
    "mutation_instruction": "",
    "gate_decision": None,
    "gate_reason": "",
    "knowledge_state": None,
    "gate_document_ids": [],
    "evidence_record_id": None,
    "documents": [],
    "candidates": [],
}
"""The per-iteration keys of `OuterState` (what ``select`` and the iteration's nodes write),
with the value an iteration that did not set one has. ``collect`` copies them from the
finished iteration into the graph state for ``record``."""

BOOKKEEPING_KEYS = ("in_flight", "issued", "reissue", "collected", "iterations_done")
"""State keys of the dispatcher itself; an iteration graph never sees them."""


def iteration_payload(state: dict[str, Any], selected: dict[str, Any]) -> dict[str, Any]:
    """The input of one iteration graph.

    The outer state as it is now, with ``select``'s update for this iteration on top; without the
    dispatcher's keys and without ``candidates`` (the iteration starts with none).
    """
    payload = {k: v for k, v in state.items() if k not in BOOKKEEPING_KEYS}
    payload.update(selected)
    payload.pop("candidates", None)
    return payload


class IterationPool:
    """Runs iteration graphs in worker threads and hands back each result as it finishes.

    Args:
        graph: the compiled iteration graph (gate → … → evaluate), no checkpointer.
        workers: k, the most iterations at once.
        config: the LangGraph run config of each iteration (``max_concurrency``,
            ``recursion_limit``).
    """

    def __init__(self, graph: Any, workers: int, config: dict[str, Any]) -> None:
        self.graph = graph
        self.workers = workers
        self.config = config
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="evoduet-iteration"
        )
        self._results: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self._pending: set[int] = set()
        self._lock = threading.Lock()
        self._closed = False

    def pending(self) -> set[int]:
        """Iteration numbers started and not yet handed back (running or finished)."""
        with self._lock:
            return set(self._pending)

    def submit(self, iteration: int, payload: dict[str, Any], context: Any) -> None:
        """Start iteration ``iteration`` from ``payload`` (`iteration_payload`).

        ``context`` is the iteration graph's runtime context (the ``dispatch`` node gives each
        iteration its own, with a snapshot of the population).
        """
        with self._lock:
            self._pending.add(iteration)
        self._executor.submit(self._run, iteration, payload, context)

    def _run(self, iteration: int, payload: dict[str, Any], context: Any) -> None:
        values: Any = payload
        try:
            for namespace, mode, chunk in self.graph.stream(
                payload,
                self.config,
                context=context,
                stream_mode=["custom", "values"],
                subgraphs=True,
            ):
                if mode == "custom" and isinstance(chunk, dict):
                    if namespace:  # the inner loop's nodes, tagged as the run's stream does
                        chunk = {**chunk, "subgraph": str(namespace[0]).split(":")[0]}
                    self._results.put(("event", None, chunk))
                elif mode == "values" and not namespace:
                    values = chunk
        except BaseException as exc:  # noqa: BLE001 - whatever ends a worker must reach `collect`,
            # which raises it in the graph (else it would wait for this iteration forever)
            self._results.put(("error", iteration, exc))
            return
        self._results.put(("done", iteration, values))

    def next_result(
        self, wanted: Iterable[int], forward: Callable[[dict[str, Any]], Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Wait for the next iteration of ``wanted`` to finish.

        Args:
            wanted: the iteration numbers the graph state has in flight.
            forward: called with every progress event the iterations wrote meanwhile (the
                calling node's ``runtime.stream_writer``).

        Returns:
            ``(iteration, final state values of its iteration graph)``.

        Raises:
            Exception: the exception an iteration raised (the run stops there, resumably;
                the other iterations in flight are lost, as after a kill).
        """
        wanted = set(wanted)
        while True:
            kind, iteration, value = self._results.get()
            if kind == "event":
                if forward is not None:
                    forward(value)
                continue
            with self._lock:
                self._pending.discard(iteration)
            if kind == "error":
                raise value
            if iteration in wanted:
                return iteration, value

    def close(self) -> None:
        """Stop starting iterations; those running finish in the background, unrecorded."""
        if not self._closed:
            self._closed = True
            self._executor.shutdown(wait=False, cancel_futures=True)
