"""Live progress of a run in the terminal (rich) or as JSON lines.

Both consume the progress events that `evoduet_graph.api.run` forwards from LangGraph's custom
stream (``on_event``; see `evoduet_graph.api.EventFn`):

* `LiveDisplay` — an iteration bar with elapsed time and ETA, then one line each for the
  current node (and the gate decision with the open knowledge gap), the inner loop's round and
  query, the best score / NDG / LLM throughput / failures, and an offline index build;
* `JsonLines` — every event as one JSON object per line (``evoduet run --json``), the same
  schema as ``events.jsonl`` plus ``node_start``, ``queries``, ``search``, ``new_best`` and
  ``index`` events.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any, Self

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from evoduet_graph.rundir.events import _jsonable
from evoduet_graph.rundir.usage import INCLUSIVE_NODES, finite_number
from evoduet_graph.task import Task

__all__ = ["JsonLines", "LiveDisplay", "RunStatus"]


def _short(text: Any, limit: int = 90) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class RunStatus:
    """What the progress events have said so far (the model behind `LiveDisplay`).

    Attributes:
        iteration: the iteration in progress; completed: iterations recorded.
        node: the node running now (``search (query_evolution)`` for inner nodes).
        decision / gap: this iteration's gate decision and the open knowledge gap.
        round / rounds / query / results: the inner loop's round, current query and hits.
        best / best_iteration / metric_value / ndg: the best program so far.
        llm_calls / output_tokens / llm_seconds: LLM usage (tokens/s = tokens / seconds).
        candidates: latest status per candidate id; consecutive_failures: from ``record``.
        rejections: drafts the novelty check rejected before evaluation (``novelty_rejected``).
        index: a line about an offline index being built, or None.
        node_errors: node executions that raised.
        view_url: the address of the run's page (``evoduet run --view``), or None.
    """

    def __init__(self, task: Task | None = None) -> None:
        self.task = task
        self.iteration = 0
        self.completed = 0
        self._collected_done: int | None = None
        self.node = "starting"
        self.decision: str | None = None
        self.gap: str | None = None
        self.round: int | None = None
        self.rounds: int | None = None
        self.query: str | None = None
        self.results: int | None = None
        self.cached = False
        self.best: float | None = None
        self.best_iteration: int | None = None
        self.metric_value: float | None = None
        self.ndg: float | None = None
        self.llm_calls = 0
        self.output_tokens = 0
        self.llm_seconds = 0.0
        self.candidates: dict[str, str] = {}
        self.consecutive_failures = 0
        self.rejections = 0
        self.index: str | None = None
        self.node_errors = 0
        self.view_url: str | None = None

    # -- updating ----------------------------------------------------------------------------

    def update(self, event: dict[str, Any]) -> None:
        """Fold one progress event into the status."""
        kind = event.get("event")
        handler = getattr(self, f"_on_{kind!s}", None)
        if handler is not None:
            handler(event)

    def _on_node_start(self, ev: dict[str, Any]) -> None:
        node = str(ev.get("node"))
        self.node = f"{node} ({ev['subgraph']})" if ev.get("subgraph") else node
        if ev.get("rounds") is not None:
            self.round, self.rounds = ev.get("round"), ev.get("rounds")

    def _on_node(self, ev: dict[str, Any]) -> None:
        node = ev.get("node")
        if "error" in ev:
            self.node_errors += 1
        if isinstance(ev.get("iteration"), int) and not ev.get("subgraph"):
            self.iteration = max(self.iteration, ev["iteration"])
        if node == "select":
            self.decision = self.gap = self.query = None
            self.round = self.rounds = self.results = None
        if ev.get("gate_decision"):
            self.decision = ev["gate_decision"]
        if ev.get("knowledge_gap"):
            self.gap = ev["knowledge_gap"]
        if node == "initialize" and ev.get("best_score") is not None:
            self.best = ev["best_score"]
            self.best_iteration = 0
        if node == "collect" and isinstance(ev.get("iterations_done"), int):
            self._collected_done = ev["iterations_done"]  # iterations in flight (k > 1)
        if node == "record":
            done = self._collected_done
            if done is None:  # sequential loop: iteration n is the n-th recorded
                done = int(finite_number(ev.get("iteration")))
            self.completed = max(self.completed, done)
            self.consecutive_failures = int(finite_number(ev.get("consecutive_failures")))
            if ev.get("best_score") is not None:
                self.best = ev["best_score"]
                self.best_iteration = ev.get("iteration")
        for cand in ev.get("candidates") or []:
            if isinstance(cand, dict) and cand.get("id") is not None:
                status = str(cand.get("status"))
                if status == "evaluated" and not cand.get("valid"):
                    status = "rejected"
                self.candidates[str(cand["id"])] = status
        if node not in INCLUSIVE_NODES:
            self.llm_calls += int(finite_number(ev.get("llm_calls")))
            self.output_tokens += int(finite_number(ev.get("output_tokens")))
            self.llm_seconds += finite_number(ev.get("llm_latency_s"))

    def _on_novelty_rejected(self, ev: dict[str, Any]) -> None:
        self.rejections += 1

    def _on_queries(self, ev: dict[str, Any]) -> None:
        queries = ev.get("queries") or []
        self.query = " | ".join(str(q) for q in queries) if queries else None
        self.results = None

    def _on_search(self, ev: dict[str, Any]) -> None:
        self.query = str(ev.get("query"))
        self.results = int(finite_number(ev.get("results")))
        self.cached = bool(ev.get("cached"))

    def _on_new_best(self, ev: dict[str, Any]) -> None:
        self.best = ev.get("score", self.best)
        self.best_iteration = ev.get("iteration")
        self.metric_value = ev.get("metric_value")
        self.ndg = ev.get("ndg")

    def _on_index(self, ev: dict[str, Any]) -> None:
        stage = ev.get("stage")
        if stage == "done":
            self.index = None
            return
        if stage == "start":
            self.index = "loading or building the offline search index"
        elif stage == "files":
            self.index = f"building the offline search index: {ev.get('files')} corpus files read"
        elif stage == "pydoc":
            self.index = (
                f"building the offline search index: {ev.get('module')} "
                f"({int(finite_number(ev.get('done'))) + 1}/{ev.get('total')} modules of "
                f"{ev.get('package')})"
            )
        elif stage == "bm25":
            self.index = (
                f"building the offline search index: BM25 over {ev.get('documents')} documents"
            )

    # -- reading -----------------------------------------------------------------------------

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second of model-call time (None before any timed call)."""
        return self.output_tokens / self.llm_seconds if self.llm_seconds > 0 else None

    def failures(self) -> dict[str, int]:
        """Candidates by failure kind.

        Candidates by failure kind: ``invalid`` (no usable code), ``failed`` (LLM call
        failed), ``rejected`` (evaluated but not valid).
        """
        out = {"invalid": 0, "failed": 0, "rejected": 0}
        for status in self.candidates.values():
            if status in out:
                out[status] += 1
        return out

    def lines(self) -> list[str]:
        """The status lines under the bar (plain text, one line each)."""
        lines = [self._node_line()]
        if self.rounds is not None or self.query:
            lines.append(self._inner_line())
        lines.append(self._best_line())
        if self.index:
            lines.append(self.index)
        if self.view_url:
            lines.append(f"view: {self.view_url}")
        return lines

    def _node_line(self) -> str:
        """The current node, iteration and gate decision."""
        node = f"node: {self.node}"
        if self.iteration:
            node += f" (iteration {self.iteration})"
        if self.decision:
            node += f" · gate: {self.decision}"
            if self.gap:
                node += f" — gap: {_short(self.gap, 120)}"
        return node

    def _inner_line(self) -> str:
        """The inner loop's round, query and results."""
        inner = "inner loop:"
        if self.rounds is not None:
            inner += f" round {int(finite_number(self.round)) + 1}/{self.rounds}"
        if self.query:
            inner += f" · query: “{_short(self.query, 80)}”"
        if self.results is not None:
            inner += f" · {self.results} results" + (" (cached)" if self.cached else "")
        return inner

    def _best_line(self) -> str:
        """The best score, NDG, LLM usage and failures so far."""
        best = "best: " + (f"{self.best:.6g}" if isinstance(self.best, int | float) else "n/a")
        if self.best_iteration is not None:
            best += f" (iteration {self.best_iteration})"
        if self.metric_value is not None:
            best += f" · metric {self.metric_value:.6g}"
        if self.ndg is not None:
            best += f" · NDG {self.ndg:.1f}%"
        tps = self.tokens_per_s
        best += f" · LLM {self.llm_calls} calls, {self.output_tokens:,} tokens"
        if tps is not None:
            best += f", {tps:.1f} tok/s"
        fails = self.failures()
        total = sum(fails.values())
        best += f" · failures: {total}"
        if total:
            best += " (" + ", ".join(f"{n} {k}" for k, n in fails.items() if n) + ")"
        if self.consecutive_failures:
            best += f", {self.consecutive_failures} iteration(s) in a row"
        if self.rejections:
            duplicates = sum(1 for s in self.candidates.values() if s == "duplicate")
            best += (
                f" · near-duplicates rejected: {self.rejections} draft(s), "
                f"{duplicates} candidate(s) not evaluated"
            )
        if self.node_errors:
            best += f" · node errors: {self.node_errors}"
        return best


class LiveDisplay:
    """Rich live display: an iteration bar with ETA and the `RunStatus` lines under it.

    Use as a context manager and pass `on_event` to `evoduet_graph.api.run`. With
    ``enabled=False`` nothing is drawn (``--quiet``) but the status is still kept.

    Args:
        task: the task (its name labels the bar).
        total: planned total iterations; done: iterations already completed (resume).
        console: where to draw (the CLI uses stderr).
        enabled: draw or not.
    """

    def __init__(
        self,
        task: Task,
        total: int,
        *,
        console: Console | None = None,
        enabled: bool = True,
        done: int = 0,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.status = RunStatus(task)
        self.status.completed = done
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("iterations ·"),
            TimeElapsedColumn(),
            TextColumn("elapsed · ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.bar = self.progress.add_task(task.name, total=max(total, 1), completed=done)
        self.live = Live(
            self._renderable(),
            console=self.console,
            refresh_per_second=4,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def _renderable(self) -> Group:
        lines = [Text(line, no_wrap=True, overflow="ellipsis") for line in self.status.lines()]
        return Group(self.progress, *lines)

    def on_event(self, event: dict[str, Any]) -> None:
        """Fold a progress event into the display."""
        self.status.update(event)
        self.progress.update(self.bar, completed=self.status.completed)
        if self.enabled:
            self.live.update(self._renderable())

    def __enter__(self) -> Self:
        if self.enabled:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            if exc[0] is not None and self.status.node == "starting":
                self.live.transient = True  # failed before any node ran: leave no empty frame
            self.live.update(self._renderable())
            self.live.__exit__(*exc)  # type: ignore[arg-type]
            if not self.console.is_terminal and not self.live.transient:
                # off a terminal Live's last frame ends without a newline: the next line
                # (the end-of-run summary) would start on the frame's last line
                self.console.line()


class JsonLines:
    """Writes each progress event as one JSON line (``--json``); flushes after every line."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout

    def on_event(self, event: dict[str, Any]) -> None:
        """Write one progress event."""
        self.write(event)

    def write(self, obj: dict[str, Any]) -> None:
        """Write ``obj`` as one JSON line and flush."""
        self.stream.write(json.dumps(_jsonable(obj), default=str) + "\n")
        self.stream.flush()
