"""``evoduet bench``: every (task, method, seed) run, resumable, into one output folder.

Methods (`METHODS` is the default set):

* ``evoduet`` — our graph with the LLM retrieval gate (``gate.mode: llm``) and the offline
  search backend (``retrieval.backend: offline``);
* ``openevolve-mode`` — our graph with ``gate.mode: never``: the paper's OpenEvolve baseline
  under identical code;
* ``openevolve`` — the real OpenEvolve package (`evoduet_graph.bench.openevolve_method`);
* ``evoduet-topk``, ``evoduet-bestofn``, ``evoduet-evox`` — ``evoduet`` with the ``top_k``,
  ``best_of_n`` (N = 4) or ``evox`` scaffold (`GRAPH_METHODS`);
* the ablation ladder's rows by name (`LADDER_METHODS`): ``oracle``, ``joint-search``,
  ``stagnation``, ``always``, ``heuristic``, ``rerank``, ``no-query-evolution``,
  ``no-search-database``, ``select-relevance-novelty``, ``grounding-offline``,
  ``grounding-online``, ``parallel-8`` — each is its file in ``configs/``;
* any configuration file: a YAML path, or the stem of a file in ``./configs`` (else the
  repository's ``configs/``), e.g. ``always_retrieve`` or ``scaffold_evox``: our graph with
  that file laid over the base configuration (`config_method`). Its ``llm`` section is not
  allowed (the bench's ``--model`` chooses the model of every method); ``iterations`` and
  ``seed`` are the bench's.

All of them talk to the same model. With ``--model local`` the embedded GGUF is served once by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1 (`LlamaCppServer`) and our methods use
``openai:<alias>`` with that ``base_url`` while OpenEvolve gets it as ``llm.api_base``. With
``--model openai:<m>`` every method calls that endpoint (``llm.base_url`` /
``$OPENAI_BASE_URL``, key from ``$OPENAI_API_KEY``). Sampling settings (temperature,
max_tokens, timeout, retries) come from the ``llm`` section of the base configuration for all
methods; our methods ask for SEARCH/REPLACE diffs exactly when the task's OpenEvolve config does
(``diff_based_evolution``, default true) unless the base configuration sets
``prompt.diff_based``.

Output folder::

    <out>/manifest.json     versions (evoduet_graph, llama-cpp-python, openevolve), model +
                            sha256, server command, settings of every invocation
    <out>/results.csv       one row per (task, method, seed, iteration)
    <out>/runs.csv          one row per (task, method, seed): status, final figures, versions
    <out>/summary.md        mean ± sd NDG per task and method, and overall
    <out>/plots/*.png       best-so-far vs iteration per task; NDG bars per method
    <out>/server.log        the llama.cpp server's log (``--model local``)
    <out>/runs/<task>/<method>/seed<k>/bench_run.json   status, sessions, outcome, error
    <out>/runs/<task>/<method>/seed<k>/run/             our run directory (evoduet report ...)
    <out>/runs/<task>/<method>/seed<k>/openevolve/      OpenEvolve's config, output, log

Resumption: a run whose ``bench_run.json`` says ``done`` for at least the requested iterations
is skipped; any other run (killed, failed, or asked for more iterations) continues from its
run directory (our checkpoints / OpenEvolve's ``--checkpoint``). A run that raises is recorded
as ``failed`` with its error and the bench goes on; the next invocation retries it.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI

import evoduet_graph
from evoduet_graph.bench.common import (
    Endpoint,
    MethodOutcome,
    Session,
    floored_ndg,
    is_better,
    iteration_points,
    running_best,
    total_wall,
)
from evoduet_graph.config import ConfigError, EvoDuetConfig, LLMConfig, merge_config
from evoduet_graph.evaluation import Evaluator, make_evaluator
from evoduet_graph.llm.factory import parse_model_string
from evoduet_graph.nodes.record import MODEL_DOWN_PREFIX
from evoduet_graph.report.summary import paper_metrics, run_summary
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.read import read_json
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.rundir.usage import usage_by_iteration
from evoduet_graph.search import Searcher
from evoduet_graph.task import Task, TaskError, load_task

__all__ = [
    "DEFAULT_SEEDS",
    "GRAPH_METHODS",
    "LADDER_METHODS",
    "METHODS",
    "BenchError",
    "BenchResult",
    "BenchSettings",
    "Job",
    "JobContext",
    "MethodRunner",
    "config_method",
    "graph_outcome",
    "parse_list",
    "resolve_tasks",
    "run_bench",
]

_EVODUET: dict[str, Any] = {"gate": {"mode": "llm"}, "retrieval": {"backend": "offline"}}

GRAPH_METHODS: dict[str, dict[str, Any]] = {
    "evoduet": _EVODUET,
    "openevolve-mode": {"gate": {"mode": "never"}},
    "evoduet-topk": {**_EVODUET, "scaffold": "top_k"},
    "evoduet-bestofn": {**_EVODUET, "scaffold": "best_of_n", "candidates": 4},
    "evoduet-evox": {**_EVODUET, "scaffold": "evox"},
}
"""Our graph's built-in methods: the configuration each lays over the bench's base
configuration (nested like a YAML file)."""

LADDER_METHODS: dict[str, str] = {
    "oracle": "oracle_documents",
    "joint-search": "joint_search",
    "stagnation": "stagnation",
    "always": "always_retrieve",
    "heuristic": "heuristic",
    "rerank": "rerank",
    "no-query-evolution": "no_query_evolution",
    "no-search-database": "no_search_database",
    "select-relevance-novelty": "select_relevance_novelty",
    "grounding-offline": "grounding_offline",
    "grounding-online": "grounding_online",
    "parallel-8": "parallel_8",
}
"""The ablation ladder's bench names (README "Baselines and ablations") → the file in
``configs/`` that defines each row (one home per row: the bench reads the file)."""

METHODS: tuple[str, ...] = ("evoduet", "openevolve-mode", "openevolve")
METHOD_ORDER: tuple[str, ...] = (
    *METHODS,
    *LADDER_METHODS,
    *(m for m in GRAPH_METHODS if m not in METHODS),
)
"""Order of the methods in tables and plots (others follow by name)."""
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
BENCH_RUN = "bench_run.json"
LOCAL_KEY_ENV = "EVODUET_LOCAL_SERVER_KEY"
"""Key variable our methods read for the bench's own server (normally unset: no key is sent)."""

RESULT_COLUMNS = (
    "task",
    "method",
    "seed",
    "iteration",
    "best",
    "ndg",
    "llm_calls",
    "tokens",
    "wall_s",
    "status",
)
RUN_COLUMNS = (
    "task",
    "method",
    "seed",
    "status",
    "iterations",
    "initial",
    "best",
    "ndg",
    "llm_calls",
    "tokens",
    "wall_s",
    "notes",
    "error",
    "model",
    "model_sha256",
    "evoduet_graph",
    "llama_cpp_python",
    "openevolve",
)

LogFn = Callable[[str], None]


class BenchError(RuntimeError):
    """The bench cannot start (bad task, unknown method, missing dependency, dead server)."""


@dataclass
class BenchSettings:
    """What a bench runs.

    Attributes:
        tasks: task folders.
        out: the output folder (created; reused to resume).
        methods: names from `METHODS` / `GRAPH_METHODS`, configuration files (a YAML path
            or a stem in ``configs/``; see `config_method`), or names given in ``runners``.
        seeds: random seeds; one run per (task, method, seed).
        iterations: iterations per run.
        model: ``local`` (served by llama.cpp) or ``openai:<model>``.
        config: base configuration of our methods; its ``llm`` section also sets the sampling
            settings every method uses. Default: `EvoDuetConfig` defaults.
        openevolve_version: the OpenEvolve release to install.
        openevolve_venv: its virtual environment (default: a cache folder).
        openevolve_timeout_s: wall limit of one OpenEvolve process (None: none).
        server_startup_timeout_s: how long to wait for the local server.
    """

    tasks: list[Path]
    out: Path
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    seeds: list[int] = field(default_factory=lambda: list(DEFAULT_SEEDS))
    iterations: int = 10
    model: str = "local"
    config: EvoDuetConfig | None = None
    openevolve_version: str | None = None
    openevolve_venv: Path | None = None
    openevolve_timeout_s: float | None = None
    server_startup_timeout_s: float = 180.0


@dataclass(frozen=True)
class Job:
    """One (task, method, seed) run.

    Attributes:
        task: the loaded task.
        method: the method name.
        seed: the seed.
        iterations: requested iterations.
        dir: its folder ``<out>/runs/<task>/<method>/seed<seed>``.
    """

    task: Task
    method: str
    seed: int
    iterations: int
    dir: Path

    @property
    def label(self) -> str:
        """``task/method/seed<k>`` for messages."""
        return f"{self.task.name}/{self.method}/seed{self.seed}"


LLMFactory = Callable[[Job], BaseChatModel]
SearcherFactory = Callable[[Job], Searcher]


class JobContext:
    """Everything a method runner needs for one job (built by `run_bench`).

    Attributes:
        job: the job.
        endpoint: the model endpoint (None when our methods use an injected model only).
        config: the base `EvoDuetConfig` with the endpoint filled in (``llm.model`` /
            ``llm.base_url``) — our methods derive their configuration from it.
        llm_factory: injected chat model for our methods (tests), else None.
        searcher_factory: injected search backend for our methods (tests), else None.
        log: progress messages.
    """

    def __init__(
        self,
        job: Job,
        *,
        endpoint: Endpoint | None,
        config: EvoDuetConfig,
        llm_factory: LLMFactory | None,
        searcher_factory: SearcherFactory | None,
        openevolve: Callable[[], Any],
        state: _RunState,
        log: LogFn,
        openevolve_timeout_s: float | None = None,
    ) -> None:
        self.job = job
        self.endpoint = endpoint
        self.config = config
        self.llm_factory = llm_factory
        self.searcher_factory = searcher_factory
        self._openevolve = openevolve
        self._state = state
        self.log = log
        self.openevolve_timeout_s = openevolve_timeout_s

    def openevolve_env(self) -> Any:
        """The installed OpenEvolve (`OpenEvolveEnv`), installing it on first use.

        Raises:
            OpenEvolveError: the installation failed (every OpenEvolve job records it).
        """
        return self._openevolve()

    def evaluator(self) -> Evaluator:
        """OUR sandboxed evaluator of the task, configured like our methods' runs."""
        return make_evaluator(self.job.task, self.config.evaluation)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Time the enclosed work as one session of the run (persisted at once)."""
        self._state.start_session()
        try:
            yield
        finally:
            self._state.end_session()

    def sessions(self) -> list[Session]:
        """The run's sessions so far (earlier invocations included)."""
        return list(self._state.sessions)


MethodRunner = Callable[[JobContext], MethodOutcome]


# ------------------------------------------------------------------------------------------
# per-run state file
# ------------------------------------------------------------------------------------------


class _RunState:
    """``bench_run.json`` of one job: status, sessions, outcome, error (written atomically)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.path = job.dir / BENCH_RUN
        data = read_json(self.path) or {}
        self.data: dict[str, Any] = data
        self.sessions = [Session(**s) for s in data.get("sessions") or []]

    @property
    def status(self) -> str | None:
        return self.data.get("status")

    def finished(self, iterations: int) -> bool:
        return self.status == "done" and int(self.data.get("iterations") or 0) >= iterations

    def outcome(self) -> MethodOutcome | None:
        raw = self.data.get("outcome")
        return MethodOutcome.from_json(raw) if isinstance(raw, dict) else None

    def save(self, **fields: Any) -> None:
        self.data.update(fields)
        self.data.update(
            task=self.job.task.name,
            task_dir=str(self.job.task.path),
            method=self.job.method,
            seed=self.job.seed,
            sessions=[{"start": s.start, "end": s.end} for s in self.sessions],
            updated=time.time(),
        )
        _write_json(self.path, self.data)

    def start_session(self) -> None:
        self.sessions.append(Session(start=time.time()))
        self.save()

    def end_session(self) -> None:
        if self.sessions and self.sessions[-1].end is None:
            self.sessions[-1].end = time.time()
        self.save()



def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------
# our graph's methods
# ------------------------------------------------------------------------------------------


def _graph_config(ctx: JobContext, overlay: dict[str, Any], source: str) -> EvoDuetConfig:
    """The job's configuration: ``overlay`` over the bench's base (`merge_config`), with the
    bench's iterations and seed, and diffs as the task's OpenEvolve config asks unless the
    base sets ``prompt.diff_based``."""
    job = ctx.job
    cfg = merge_config(ctx.config, overlay, source)
    overrides: dict[str, Any] = {"iterations": job.iterations, "seed": job.seed}
    if cfg.prompt.diff_based is None:
        overrides["prompt.diff_based"] = bool(
            job.task.openevolve_config.get("diff_based_evolution", True)
        )
    return cfg.with_overrides(overrides)


def _configs_dir() -> Path:
    return Path("configs") if Path("configs").is_dir() else _bundled_tasks_dir().parent / "configs"


def config_method(
    name: str, configs_dir: Path | None = None
) -> tuple[str, dict[str, Any], Path] | None:
    """A method given as a configuration file: a ``.yaml``/``.yml`` path, or the stem of a
    file in ``configs_dir`` (default ``./configs`` if it exists, else the repository's).

    Returns:
        ``(label, overlay, path)`` — the label is the file's stem (the job folder's name),
        the overlay the file's mapping without ``iterations`` and ``seed`` — or None when
        ``name`` names no such file.

    Raises:
        BenchError: the file is not a YAML mapping, or it has an ``llm`` section.
    """
    path = Path(name).expanduser()
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        path = (configs_dir or _configs_dir()) / f"{name}.yaml"
        if not path.is_file():
            return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BenchError(f"method config {path} is not readable YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BenchError(f"method config {path} must hold a mapping")
    if "llm" in data:
        raise BenchError(
            f"method config {path} has an llm section; the bench's --model (and the base "
            "--config) choose the model of every method"
        )
    overlay = {k: v for k, v in data.items() if k not in ("iterations", "seed")}
    return path.stem, overlay, path.resolve()


class LlamaCppChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` for llama-cpp-python's OpenAI-compatible server.

    That server (0.3.x) accepts ``response_format`` types ``text`` and ``json_object`` only
    (with an optional ``schema``, which it compiles into a grammar); a ``json_schema`` request
    fails with HTTP 500, which the OpenAI client retries before our structured-output helper
    falls back. ``with_structured_output(method="json_schema")`` is therefore sent as
    ``{"type": "json_object", "schema": <schema>}``: the same schema-constrained decoding, one
    request.
    """

    native_tool_calling: ClassVar[bool] = False
    """llama-cpp-python's server calls tools only with a function-calling chat format, which
    the embedded model is not served with: joint-level search takes its structured path."""

    def with_structured_output(  # type: ignore[override]
        self,
        schema: Any = None,
        *,
        method: str = "json_schema",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Any:
        """`ChatOpenAI.with_structured_output`, with ``json_schema`` as described above."""
        if method == "json_schema" and schema is not None:
            from langchain_core.utils.function_calling import convert_to_json_schema

            body = dict(self.extra_body or {})
            body["response_format"] = {
                "type": "json_object",
                "schema": convert_to_json_schema(schema),
            }
            constrained = self.model_copy(update={"extra_body": body})
            return ChatOpenAI.with_structured_output(
                constrained, schema, method="json_mode", include_raw=include_raw, **kwargs
            )
        return super().with_structured_output(
            schema, method=method, include_raw=include_raw, strict=strict, **kwargs
        )


def endpoint_chat_model(cfg: LLMConfig, *, llama_cpp_server: bool = False) -> BaseChatModel:
    """The chat model our methods use against the bench's endpoint.

    `make_chat_model` (``openai:<model>``), plus ``max_tokens`` in the request body for any
    OpenAI-compatible ``base_url``: langchain-openai (1.x) sends the completion limit only as
    ``max_completion_tokens``, which llama-cpp-python's server (0.3.x) ignores, so its
    completions would run until the context is full, while OpenEvolve sends ``max_tokens``;
    this way every method gets the same limit. OpenAI itself (no ``base_url``) is left alone:
    its reasoning models reject ``max_tokens``.

    Args:
        cfg: the ``llm`` section (``openai:<model>``).
        llama_cpp_server: the endpoint is the bench's own llama.cpp server: use
            `LlamaCppChatOpenAI`.
    """
    from evoduet_graph.llm import make_chat_model

    model = make_chat_model(cfg)
    if isinstance(model, ChatOpenAI) and cfg.base_url:
        extra = dict(model.extra_body or {})
        extra.setdefault("max_tokens", cfg.max_tokens)
        if llama_cpp_server:
            model = LlamaCppChatOpenAI(**_chat_openai_init(model), extra_body=extra)
        else:
            model = model.model_copy(update={"extra_body": extra})
    return model


def probe_endpoint(cfg: LLMConfig, log: LogFn) -> None:
    """Ask the bench's ``openai:<model>`` endpoint for a few tokens before any job runs, so a dead
    URL, a wrong model name or a rejected key stops the bench at once instead of failing every
    iteration of every job.

    Raises:
        BenchError: the key is missing, or the request failed after one retry (the message
            names the base URL and quotes the error).
    """
    try:
        # the limit goes into the config: endpoint_chat_model also puts it in the request body
        model = endpoint_chat_model(cfg.model_copy(update={"max_retries": 1, "max_tokens": 5}))
        model.invoke("Reply with OK.")
    except Exception as exc:  # noqa: BLE001 - any failure means the endpoint is unusable
        where = cfg.base_url or "OpenAI's default endpoint"
        raise BenchError(
            f"the model endpoint {where} did not answer a 5-token test request for "
            f"{cfg.model!r}: {type(exc).__name__}: {str(exc)[:300]}; check `--model`, "
            f"OPENAI_BASE_URL and {cfg.api_key_env}"
        ) from None
    log(f"model endpoint answered: {cfg.model} at {cfg.base_url or 'default URL'}")


def _chat_openai_init(model: ChatOpenAI) -> dict[str, Any]:
    """Constructor arguments that rebuild ``model`` (as `make_chat_model` configured it)."""
    key = model.openai_api_key
    return {
        "model": model.model_name,
        "base_url": model.openai_api_base,
        "api_key": key.get_secret_value() if key is not None else None,
        "temperature": model.temperature,
        "max_tokens": model.max_tokens,
        "timeout": model.request_timeout,
        "max_retries": model.max_retries,
    }


def _graph_runner(name: str, overlay: dict[str, Any], source: str | None = None) -> MethodRunner:
    """The runner of one of our graph's methods: ``overlay`` over the base configuration."""

    def run_method(ctx: JobContext) -> MethodOutcome:
        from evoduet_graph.api import can_retrieve, run

        job = ctx.job
        cfg = _graph_config(ctx, overlay, source or f"method {name!r}")
        gate_mode = cfg.gate.mode
        if ctx.llm_factory is not None:
            llm = ctx.llm_factory(job)
        elif ctx.endpoint is not None:
            llm = endpoint_chat_model(cfg.llm, llama_cpp_server=ctx.endpoint.local)
        else:
            llm = None
        searcher = None
        if can_retrieve(cfg):
            if ctx.searcher_factory is not None:
                searcher = ctx.searcher_factory(job)
            else:  # build / load the offline index here, outside the timed session
                from evoduet_graph.api import make_checked_searcher

                searcher = make_checked_searcher(job.task, cfg)
        run_dir = job.dir / "run"
        with ctx.session():
            result = run(job.task, cfg, llm=llm, run_dir=run_dir, searcher=searcher)
        if (result.stop_reason or "").startswith(MODEL_DOWN_PREFIX):
            # the endpoint failed mid-run: not a result of the method; the job is failed and
            # left out of the NDG means (a next bench invocation resumes it)
            raise BenchError(result.stop_reason)
        outcome = graph_outcome(job.task, run_dir, result.iterations, ctx.sessions())
        if result.stop_reason:
            outcome.notes.append(f"stopped early: {result.stop_reason}")
        outcome.details.update(
            gate=gate_mode,
            scaffold=cfg.scaffold,
            config=str(source) if source else None,
            stop_reason=result.stop_reason,
        )
        return outcome

    run_method.__name__ = f"run_graph_{name.replace('-', '_')}"
    return run_method


def graph_outcome(
    task: Task, run_dir: Path, iterations: int, sessions: list[Session]
) -> MethodOutcome:
    """Score one of our run directories in the bench's common terms.

    Best: over every valid program in ``programs.sqlite`` (initial included), by the task's
    metric in its direction. ``details["knowledge"]``: the run's `paper_metrics` (improvement
    rates by evidence, repeated-URL share, USD, search calls) for the summary. LLM calls and
    tokens: the node events of ``events.jsonl`` (the
    inclusive ``retrieve`` node left out, its inner nodes counted). Wall: the time each
    iteration's ``record`` event was written, over the run's sessions.

    Args:
        task: the task.
        run_dir: the run directory.
        iterations: iterations completed.
        sessions: the run's sessions.
    """
    store = ProgramStore(run_dir / layout.PROGRAMS)
    try:
        rows = store.all_programs()
    finally:
        store.close()
    by_iteration: dict[int, list[float]] = {}
    initial: float | None = None
    best: float | None = None
    best_code: str | None = None
    for row in rows:
        value = task.metric_value(row.metrics) if row.valid else None
        if value is None or row.iteration > iterations:
            continue
        by_iteration.setdefault(row.iteration, []).append(value)
        if row.id == "initial":
            initial = value
        if is_better(task, value, best):
            best, best_code = value, row.code
    curve = running_best(task, by_iteration, iterations)

    events = list(read_events(run_dir / layout.EVENTS))
    stamps: dict[int, float] = {}
    for ev in events:
        it = ev.get("iteration") if isinstance(ev.get("iteration"), int) else 0
        is_record = ev.get("event") == "node" and ev.get("node") == "record"
        if is_record and isinstance(ev.get("time"), int | float):
            stamps[it] = float(ev["time"])
    usage = usage_by_iteration(events)
    calls_by_it = {it: u.llm_calls for it, u in usage.items()}
    tokens_by_it = {it: u.tokens for it, u in usage.items()}
    points = iteration_points(curve, calls_by_it, tokens_by_it, sessions, stamps, iterations)
    calls = points[-1].llm_calls if points else 0
    tokens = points[-1].tokens if points else 0
    total = total_wall(sessions, stamps.values())
    return MethodOutcome(
        iterations=iterations,
        initial=initial,
        best=best,
        best_code=best_code,
        points=points,
        llm_calls=calls,
        tokens=tokens,
        wall_s=total,
        details={
            "programs": len(rows),
            "valid_programs": sum(len(v) for v in by_iteration.values()),
            "knowledge": {
                **paper_metrics(run_summary(run_dir)),
                **knowledge_figures(run_dir, rows, iterations),
            },
        },
    )


def knowledge_figures(run_dir: Path, rows: list[Any], iterations: int) -> dict[str, Any]:
    """The world-knowledge figures of one of our runs, for the bench summary.

    Returns:
        ``queries`` (searches issued), ``returned_urls``, ``distinct_urls``,
        ``repeated_urls`` and ``repeated_url_share`` (returned URLs already returned earlier
        in the run, and their share; None without results; from D_search's rounds when the
        run kept one, else from the ``search`` events), ``iterations_with_documents``
        / ``improved_with_documents`` and ``iterations_without_documents`` /
        ``improved_without_documents`` (an iteration improved when its best valid child beats
        its parent; it had documents when its prompt carried evidence: gate / look-up /
        retrieve documents, or a joint-search call that returned results). USD comes from
        `evoduet_graph.report.summary.paper_metrics` (``llm_usd``), merged beside these.
    """
    from evoduet_graph.report.summary import run_summary
    from evoduet_graph.search.base import normalize_url

    events = list(read_events(run_dir / layout.EVENTS))
    search = run_summary(run_dir)["search"]
    searches = [e for e in events if e.get("event") == "search"]
    returned = int(search.get("returned_urls") or 0)
    distinct = int(search.get("distinct_urls") or 0)
    if not returned:  # no D_search on disk (stateless runs): the search events
        urls = [normalize_url(str(u)) for e in searches for u in e.get("urls") or []]
        returned, distinct = len(urls), len(set(urls))
    with_docs: set[int] = set()
    for ev in events:
        it = ev.get("iteration")
        if not isinstance(it, int):
            continue
        if ev.get("event") == "node" and ev.get("node") in ("gate", "look_up", "retrieve"):
            if ev.get("documents"):
                with_docs.add(it)
        elif ev.get("event") == "search" and ev.get("joint") and ev.get("urls"):
            with_docs.add(it)
    scores = {r.id: r.score for r in rows}
    improved: set[int] = set()
    for r in rows:
        parent = scores.get(r.parent_id) if r.parent_id else None
        if r.valid and r.score is not None and parent is not None and r.score > parent:
            improved.add(r.iteration)
    its = range(1, iterations + 1)
    return {
        "queries": len(searches),
        "returned_urls": returned,
        "distinct_urls": distinct,
        "repeated_urls": returned - distinct,
        "repeated_url_share": (returned - distinct) / returned if returned else None,
        "iterations_with_documents": sum(1 for i in its if i in with_docs),
        "improved_with_documents": sum(1 for i in its if i in with_docs and i in improved),
        "iterations_without_documents": sum(1 for i in its if i not in with_docs),
        "improved_without_documents": sum(
            1 for i in its if i not in with_docs and i in improved
        ),
    }


def _openevolve_runner(ctx: JobContext) -> MethodOutcome:
    from evoduet_graph.bench.openevolve_method import run_openevolve

    if ctx.endpoint is None:
        raise BenchError("the openevolve method needs a model endpoint (no injected model)")
    env = ctx.openevolve_env()
    return run_openevolve(
        ctx.job.task,
        ctx.job.dir / "openevolve",
        iterations=ctx.job.iterations,
        seed=ctx.job.seed,
        endpoint=ctx.endpoint,
        env=env,
        evaluator=ctx.evaluator(),
        session=ctx.session,
        sessions=ctx.sessions,
        timeout_s=ctx.openevolve_timeout_s,
    )


def default_runners() -> dict[str, MethodRunner]:
    """The runners of `METHODS`."""
    runners: dict[str, MethodRunner] = {m: _graph_runner(m, o) for m, o in GRAPH_METHODS.items()}
    runners["openevolve"] = _openevolve_runner
    return runners


# ------------------------------------------------------------------------------------------
# setup helpers
# ------------------------------------------------------------------------------------------


def parse_list(text: str | None) -> list[str]:
    """``"a,b, c"`` → ``["a", "b", "c"]`` (empty items dropped)."""
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def _bundled_tasks_dir() -> Path:
    return Path(evoduet_graph.__file__).resolve().parent.parent / "tasks"


def resolve_tasks(names: Sequence[str] | None, tasks_dir: Path | None = None) -> list[Path]:
    """Task folders from names or paths.

    A name that is an existing folder is used as is; otherwise it is looked up in
    ``tasks_dir`` (default: ``./tasks`` if it exists, else the repository's ``tasks/``).
    No names: every task folder (one holding ``evaluator.py``) of that directory.

    Raises:
        BenchError: a name matches no folder, or there is no task at all.
    """
    root = tasks_dir or (Path("tasks") if Path("tasks").is_dir() else _bundled_tasks_dir())
    if not names:
        found = sorted(p for p in root.glob("*/") if (p / "evaluator.py").is_file())
        if not found:
            raise BenchError(f"no task folders in {root}; pass --tasks")
        return found
    out = []
    for name in names:
        path = Path(name).expanduser()
        if path.is_dir():
            out.append(path)
        elif (root / name).is_dir():
            out.append(root / name)
        else:
            raise BenchError(f"task {name!r} not found (neither a folder nor in {root})")
    return out


def _git_commit() -> str | None:
    root = Path(evoduet_graph.__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class _Model:
    """The model side of a bench: endpoint, our config, versions, the server (if any)."""

    endpoint: Endpoint | None
    config: EvoDuetConfig
    info: dict[str, Any]


def _setup_model(
    settings: BenchSettings,
    base: EvoDuetConfig,
    stack: contextlib.ExitStack,
    needs_endpoint: bool,
    log: LogFn,
) -> _Model:
    """Serve the embedded model or point at ``openai:<m>``; fill our config accordingly.

    Raises:
        BenchError: bad model string, missing server dependencies, model or server failure.
    """
    llm = base.llm
    try:
        provider, name = parse_model_string(settings.model)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    common = {
        "temperature": llm.temperature,
        "max_tokens": llm.max_tokens,
        "timeout_s": llm.timeout_s,
        "max_retries": llm.max_retries,
    }
    if provider == "openai":
        assert name is not None
        base_url = llm.base_url or os.environ.get("OPENAI_BASE_URL") or None
        endpoint = Endpoint(model=name, base_url=base_url, api_key_env=llm.api_key_env, **common)
        cfg = base.with_overrides({"llm.model": settings.model, "llm.base_url": base_url})
        info = {"model": settings.model, "base_url": base_url, "model_sha256": None}
        if needs_endpoint:
            probe_endpoint(cfg.llm, log)
        return _Model(endpoint, cfg, info)

    from evoduet_graph.llm.local import EXPECTED_SHA256, MODEL_NAME

    info: dict[str, Any] = {"model": f"local ({MODEL_NAME}.gguf)", "model_sha256": EXPECTED_SHA256}
    if not needs_endpoint:
        return _Model(None, base, info)
    from evoduet_graph.bench.server import LlamaCppServer, ServerError
    from evoduet_graph.llm.local import LocalModelError, assemble_model

    try:
        model_path = assemble_model(llm.local_cache_dir)
    except LocalModelError as exc:
        raise BenchError(str(exc)) from None
    server = LlamaCppServer(
        model_path,
        alias=MODEL_NAME,
        n_ctx=llm.local_n_ctx,
        n_threads=llm.local_n_threads,
        log_path=settings.out / "server.log",
        startup_timeout_s=settings.server_startup_timeout_s,
    )
    log(f"starting the model server: {' '.join(server.command())}")
    start = time.monotonic()
    try:
        server.check_dependencies()
        stack.enter_context(server)
    except ServerError as exc:
        raise BenchError(str(exc)) from None
    log(f"model server ready at {server.base_url} in {time.monotonic() - start:.1f} s")
    endpoint = Endpoint(
        model=MODEL_NAME, base_url=server.base_url, api_key_env=None, local=True, **common
    )
    cfg = base.with_overrides(
        {
            "llm.model": f"openai:{MODEL_NAME}",
            "llm.base_url": server.base_url,
            "llm.api_key_env": LOCAL_KEY_ENV,
        }
    )
    info.update(
        base_url=server.base_url,
        model_path=str(model_path),
        server_command=server.command(),
        server_ready_s=round(time.monotonic() - start, 2),
    )
    return _Model(endpoint, cfg, info)


# ------------------------------------------------------------------------------------------
# the bench
# ------------------------------------------------------------------------------------------


@dataclass
class BenchResult:
    """What `run_bench` did.

    Attributes:
        out: the output folder.
        ran: labels of the jobs run now and finished.
        skipped: labels of the jobs already finished (not run).
        failed: ``{label: error}`` of the jobs that failed now.
        results_csv, runs_csv, summary_md: the written files.
        plots: the written PNG files.
    """

    out: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    results_csv: Path | None = None
    runs_csv: Path | None = None
    summary_md: Path | None = None
    plots: list[Path] = field(default_factory=list)


def _check_plotting() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        raise BenchError(
            "the bench draws its plots with matplotlib, which is not installed: "
            "pip install matplotlib  (or: pip install 'evoduet-graph[bench]')"
        )


def run_bench(
    settings: BenchSettings,
    *,
    llm_factory: LLMFactory | None = None,
    searcher_factory: SearcherFactory | None = None,
    runners: dict[str, MethodRunner] | None = None,
    log: LogFn | None = None,
) -> BenchResult:
    """Run every pending (task, method, seed) of ``settings``, then write CSVs, table, plots.

    Args:
        settings: tasks, methods, seeds, iterations, model, output folder.
        llm_factory: a chat model per job for OUR methods (tests); when given, our methods
            need no endpoint and no server is started for them.
        searcher_factory: a search backend per job for the ``evoduet`` method (tests).
        runners: extra or replacement method runners by name (tests).
        log: progress messages (default: none).

    Returns:
        A `BenchResult`.

    Raises:
        BenchError: the bench cannot start (see `BenchError`). Failures of single runs are
            recorded, never raised. KeyboardInterrupt propagates (rerun to resume).
    """
    say = log or (lambda _msg: None)
    table = {**default_runners(), **(runners or {})}
    graph_methods = set(GRAPH_METHODS)
    config_labels: set[str] = set()
    methods: list[str] = []
    unknown = []
    for name in settings.methods:
        found = None if name in table else config_method(LADDER_METHODS.get(name, name))
        if found is not None:
            label, overlay, path = found
            label = name if name in LADDER_METHODS else label
            if label in table and label not in config_labels:
                raise BenchError(f"method config {path} is named like the method {label!r}")
            try:
                merge_config(settings.config or EvoDuetConfig(), overlay, str(path))
            except ConfigError as exc:
                raise BenchError(str(exc)) from None
            table[label] = _graph_runner(label, overlay, str(path))
            graph_methods.add(label)
            config_labels.add(label)
            name = label
        elif name not in table:
            if name.endswith((".yaml", ".yml")) or "/" in name:
                raise BenchError(f"method config file {name} does not exist")
            unknown.append(name)
        methods.append(name)
    if unknown:
        stems = sorted(p.stem for p in _configs_dir().glob("*.yaml"))
        raise BenchError(
            f"unknown method(s) {unknown}; known: {', '.join(table)}; or a YAML config path, "
            f"or a config in {_configs_dir()}: {', '.join(stems) or '(none)'}"
        )
    settings = dataclasses.replace(settings, methods=list(dict.fromkeys(methods)))
    if not settings.methods or not settings.seeds:
        raise BenchError("nothing to run: no methods or no seeds")
    if settings.iterations < 0:
        raise BenchError("iterations must be >= 0")
    try:
        parse_model_string(settings.model)
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    _check_plotting()
    try:
        tasks = [load_task(p) for p in settings.tasks]
    except TaskError as exc:
        raise BenchError(str(exc)) from None
    if len({t.name for t in tasks}) != len(tasks):
        raise BenchError("two tasks have the same name")
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    base = settings.config or EvoDuetConfig()

    jobs = [
        Job(
            task,
            method,
            seed,
            settings.iterations,
            out / "runs" / task.name / method / f"seed{seed}",
        )
        for task in tasks
        for seed in settings.seeds
        for method in settings.methods
    ]
    states = {job.label: _RunState(job) for job in jobs}
    pending = [j for j in jobs if not states[j.label].finished(settings.iterations)]
    result = BenchResult(out=out)
    result.skipped = [j.label for j in jobs if j not in pending]
    for label in result.skipped:
        say(f"skip {label}: finished")

    custom = set(runners or {})
    needs_endpoint = any(
        j.method not in custom and (j.method == "openevolve" or llm_factory is None)
        for j in pending
    )
    from evoduet_graph.bench.openevolve_method import OPENEVOLVE_VERSION, ensure_openevolve

    oe_version = settings.openevolve_version or OPENEVOLVE_VERSION
    oe_cache: dict[str, Any] = {}

    def openevolve_env() -> Any:
        if "env" not in oe_cache:
            try:
                oe_cache["env"] = ensure_openevolve(
                    settings.openevolve_venv, version=oe_version, log=say
                )
            except Exception as exc:  # noqa: BLE001 - recorded by every OpenEvolve job
                oe_cache["env"] = exc
        env = oe_cache["env"]
        if isinstance(env, Exception):
            raise env
        return env

    with contextlib.ExitStack() as stack:
        model = _setup_model(settings, base, stack, needs_endpoint and bool(pending), say)
        versions = {
            "evoduet_graph": evoduet_graph.__version__,
            "evoduet_graph_git": _git_commit(),
            "llama_cpp_python": _version("llama_cpp_python"),
            "openevolve": oe_version if "openevolve" in settings.methods else None,
            "python": platform.python_version(),
        }
        _write_manifest(out, settings, model.info, versions)
        for job in pending:
            state = states[job.label]
            ctx = JobContext(
                job,
                endpoint=model.endpoint,
                config=model.config,
                llm_factory=llm_factory if job.method in graph_methods else None,
                searcher_factory=searcher_factory,
                openevolve=openevolve_env,
                state=state,
                log=say,
                openevolve_timeout_s=settings.openevolve_timeout_s,
            )
            say(f"run  {job.label}: {job.iterations} iterations")
            injected = ctx.llm_factory is not None
            state.save(
                status="running",
                iterations=job.iterations,
                model="injected chat model" if injected else model.info.get("model"),
            )
            start = time.monotonic()
            try:
                outcome = table[job.method](ctx)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - a run's failure is recorded
                message = f"{type(exc).__name__}: {exc}"
                state.end_session()
                state.save(
                    status="failed",
                    error=message[-4000:],
                    traceback=traceback.format_exc()[-8000:],
                    versions=versions,
                    model_sha256=None if injected else model.info.get("model_sha256"),
                )
                result.failed[job.label] = message
                say(f"FAIL {job.label}: {message.splitlines()[0][:300]}")
            else:
                run_versions = dict(versions)
                if job.method == "openevolve":
                    run_versions["openevolve"] = outcome.details.get("openevolve_version")
                state.save(
                    status="done",
                    error=None,
                    traceback=None,
                    outcome=outcome.to_json(),
                    versions=run_versions,
                    model_sha256=None if injected else model.info.get("model_sha256"),
                )
                result.ran.append(job.label)
                ndg = floored_ndg(job.task, outcome.best)
                say(
                    f"done {job.label}: best={_fmt(outcome.best)} "
                    f"NDG={_fmt(ndg, '.2f')}% in {time.monotonic() - start:.1f} s"
                )
            _write_csvs(out, result)

    _write_csvs(out, result)
    from evoduet_graph.bench.tables import write_plots, write_summary

    records = collect_runs(out)
    result.summary_md = write_summary(out, records, read_json(out / "manifest.json") or {})
    result.plots = write_plots(out, records)
    return result


def _fmt(value: float | None, spec: str = ".6g") -> str:
    return "n/a" if value is None else format(value, spec)


def _write_manifest(
    out: Path, settings: BenchSettings, model_info: dict[str, Any], versions: dict[str, Any]
) -> None:
    path = out / "manifest.json"
    manifest = read_json(path) or {}
    invocations = list(manifest.get("invocations") or [])
    invocations.append(
        {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "tasks": [str(p) for p in settings.tasks],
            "methods": settings.methods,
            "seeds": settings.seeds,
            "iterations": settings.iterations,
            "model": settings.model,
            "argv": sys.argv,
        }
    )
    manifest.update(
        versions=versions,
        model=model_info,
        platform={"system": platform.platform(), "cpus": os.cpu_count()},
        llm=(settings.config or EvoDuetConfig()).llm.model_dump(mode="json"),
        invocations=invocations,
    )
    _write_json(path, manifest)


# ------------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------------


@dataclass
class RunRecord:
    """One (task, method, seed) as read back from its ``bench_run.json``.

    Attributes:
        task: the loaded task (None when its folder is gone).
        data: the raw ``bench_run.json``.
        outcome: the outcome of a finished run.
    """

    task: Task | None
    data: dict[str, Any]
    outcome: MethodOutcome | None

    @property
    def key(self) -> tuple[str, str, int]:
        return (
            str(self.data.get("task")),
            str(self.data.get("method")),
            int(self.data.get("seed", 0)),
        )

    @property
    def status(self) -> str:
        return str(self.data.get("status") or "unknown")

    def ndg(self, best: float | None) -> float | None:
        return floored_ndg(self.task, best) if self.task is not None else None


def collect_runs(out: Path) -> list[RunRecord]:
    """Every ``bench_run.json`` under ``<out>/runs``, sorted by (task, method, seed)."""
    records = []
    tasks: dict[str, Task | None] = {}
    for path in sorted((out / "runs").glob(f"*/*/seed*/{BENCH_RUN}")):
        data = read_json(path)
        if not data:
            continue
        task_dir = str(data.get("task_dir") or "")
        if task_dir not in tasks:
            try:
                tasks[task_dir] = load_task(task_dir)
            except (TaskError, OSError):
                tasks[task_dir] = None
        raw = data.get("outcome") if data.get("status") == "done" else None
        outcome = MethodOutcome.from_json(raw) if isinstance(raw, dict) else None
        records.append(RunRecord(tasks[task_dir], data, outcome))
    method_order = {m: i for i, m in enumerate(METHOD_ORDER)}
    records.sort(key=lambda r: (r.key[0], method_order.get(r.key[1], 99), r.key[1], r.key[2]))
    return records


def _num(value: float | None, digits: int = 10) -> str:
    if value is None:
        return ""
    return f"{value:.{digits}g}"


def _write_csvs(out: Path, result: BenchResult) -> None:
    records = collect_runs(out)
    results_path = out / "results.csv"
    runs_path = out / "runs.csv"
    with open(results_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(RESULT_COLUMNS)
        for rec in records:
            task, method, seed = rec.key
            if rec.outcome is None:
                writer.writerow([task, method, seed, "", "", "", "", "", "", rec.status])
                continue
            for p in rec.outcome.points:
                writer.writerow(
                    [
                        task,
                        method,
                        seed,
                        p.iteration,
                        _num(p.best),
                        _num(rec.ndg(p.best), 6),
                        p.llm_calls,
                        p.tokens,
                        _num(p.wall_s, 6),
                        rec.status,
                    ]
                )
    with open(runs_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(RUN_COLUMNS)
        for rec in records:
            task, method, seed = rec.key
            o = rec.outcome
            versions = rec.data.get("versions") or {}
            writer.writerow(
                [
                    task,
                    method,
                    seed,
                    rec.status,
                    o.iterations if o else "",
                    _num(o.initial) if o else "",
                    _num(o.best) if o else "",
                    _num(rec.ndg(o.best), 6) if o else "",
                    o.llm_calls if o else "",
                    o.tokens if o else "",
                    _num(o.wall_s, 6) if o else "",
                    "; ".join(o.notes) if o else "",
                    (rec.data.get("error") or "").splitlines()[0][:500]
                    if rec.data.get("error")
                    else "",
                    rec.data.get("model") or "",
                    rec.data.get("model_sha256") or "",
                    versions.get("evoduet_graph") or "",
                    versions.get("llama_cpp_python") or "",
                    (versions.get("openevolve") or "") if method == "openevolve" else "",
                ]
            )
    result.results_csv, result.runs_csv = results_path, runs_path
