"""What a bench runs: its methods, settings and jobs, and how one job runs.

The method tables (`GRAPH_METHODS`, `LADDER_METHODS`, `METHOD_ORDER`), `BenchSettings`, one
(task, method, seed) `Job`, the `JobContext` a method runner gets, the job's state file
(``bench_run.json``, `RunState`) and `execute_job`, which runs one job the same way for every
executor (`evoduet_graph.bench.runner` here, `evoduet_graph.bench.executor` on Ray).
"""

from __future__ import annotations

import contextlib
import json
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError

from evoduet_graph import Evaluator, EvoDuetConfig, Searcher, Task, make_evaluator
from evoduet_graph.bench.common import (
    BenchError,
    Endpoint,
    LogFn,
    MethodOutcome,
    Session,
    floored_ndg,
    fmt,
    write_json,
)

__all__ = [
    "BenchShared",
    "BENCH_RUN",
    "DEFAULT_SEEDS",
    "GRAPH_METHODS",
    "LADDER_METHODS",
    "METHODS",
    "METHOD_ORDER",
    "BenchResult",
    "BenchSettings",
    "Job",
    "JobContext",
    "JobResult",
    "LLMFactory",
    "MethodRunner",
    "OpenEvolveSpec",
    "RunRecordError",
    "RunState",
    "SearcherFactory",
    "execute_job",
    "read_run_record",
]

BENCH_RUN = "bench_run.json"
"""The state file of one job, in its folder ``<out>/runs/<task>/<method>/seed<k>/``."""

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
    "no-search-database-full-loop": "no_search_database_full_loop",
    "select-relevance-novelty-full-loop": "select_relevance_novelty_full_loop",
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
        executor: ``local`` (one run after another in this process) or ``ray`` (each run a
            Ray task: `evoduet_graph.bench.executor`).
        variants: named variants of our methods, ``{label: (method, overlay)}``: the method
            (a name or config, as in ``methods``) with ``overlay`` laid over its configuration
            (a protocol's ``{name: evoduet-n8, method: evoduet, config: {candidates: 8}}``).
        forced: settings laid over every one of our methods' configurations after the
            method's own, under a variant's (a protocol's ``candidates``,
            ``retrieval.backend``), dotted keys.
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
    executor: str = "local"
    variants: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    forced: dict[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class JobContext:
    """Everything a method runner needs for one job (built by `BenchShared.context`).

    Attributes:
        job: the job.
        endpoint: the model endpoint (None when our methods use an injected model only).
        config: the base `EvoDuetConfig` with the endpoint filled in (``llm.model`` /
            ``llm.base_url``) — our methods derive their configuration from it.
        llm_factory: injected chat model for our methods (tests), else None.
        searcher_factory: injected search backend for our methods (tests), else None.
        openevolve: installs OpenEvolve on first use and returns it (`openevolve_env`).
        state: the job's ``bench_run.json``.
        log: progress messages.
        openevolve_timeout_s: wall limit of one OpenEvolve process (None: its default).
    """

    job: Job
    _: KW_ONLY
    endpoint: Endpoint | None
    config: EvoDuetConfig
    llm_factory: LLMFactory | None
    searcher_factory: SearcherFactory | None
    openevolve: Callable[[], Any]
    state: RunState
    log: LogFn
    openevolve_timeout_s: float | None = None

    def openevolve_env(self) -> Any:
        """The installed OpenEvolve (`OpenEvolveEnv`), installing it on first use.

        Raises:
            OpenEvolveError: the installation failed (every OpenEvolve job records it).
        """
        return self.openevolve()

    def evaluator(self) -> Evaluator:
        """OUR sandboxed evaluator of the task, configured like our methods' runs."""
        return make_evaluator(self.job.task, self.config.evaluation)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Time the enclosed work as one session of the run (persisted at once)."""
        self.state.start_session()
        try:
            yield
        finally:
            self.state.end_session()

    def sessions(self) -> list[Session]:
        """The run's sessions so far (earlier invocations included)."""
        return list(self.state.sessions)


MethodRunner = Callable[[JobContext], MethodOutcome]


# ------------------------------------------------------------------------------------------
# per-run state file
# ------------------------------------------------------------------------------------------


class RunRecordError(BenchError):
    """A ``bench_run.json`` that is not a run record the bench wrote (named in the message)."""


class _RecordShape(BaseModel):
    """The fields of ``bench_run.json`` the bench reads back (others are kept as they are)."""

    model_config = ConfigDict(extra="allow")

    task: str | None = None
    method: str | None = None
    seed: StrictInt | None = None
    status: Literal["running", "done", "failed"] | None = None
    iterations: StrictInt | None = None
    sessions: list[Session] = []
    outcome: MethodOutcome | None = None


def read_run_record(path: Path) -> dict[str, Any] | None:
    """One job's ``bench_run.json``, its fields' types checked.

    The bench writes these files atomically, so one that does not read back was changed or
    damaged from outside; it is refused by name rather than taken for a run that never started
    (which would run the job again over it) or skipped in the summary.

    Returns:
        The record as stored; None when there is no file.

    Raises:
        RunRecordError: the file is not JSON, not an object, or a field has the wrong type.
    """
    if not path.exists():
        return None
    fix = "repair it, or move it away to run that job again"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunRecordError(f"run record {path} cannot be read ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise RunRecordError(f"run record {path} is not a JSON object; {fix}")
    try:
        _RecordShape.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise RunRecordError(f"run record {path}: {problems}; {fix}") from None
    return data


class RunState:
    """``bench_run.json`` of one job: status, sessions, outcome, error (written atomically)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.path = job.dir / BENCH_RUN
        data = read_run_record(self.path) or {}
        self.data: dict[str, Any] = data
        self.sessions = [Session(**s) for s in data.get("sessions") or []]

    @property
    def status(self) -> str | None:
        """``running``, ``done`` or ``failed``; None before the job first ran."""
        return self.data.get("status")

    def finished(self, iterations: int) -> bool:
        """Whether the job is done with at least ``iterations`` iterations."""
        return self.status == "done" and int(self.data.get("iterations") or 0) >= iterations

    def outcome(self) -> MethodOutcome | None:
        """The recorded outcome of a finished job (None: none recorded)."""
        raw = self.data.get("outcome")
        return MethodOutcome.from_json(raw) if isinstance(raw, dict) else None

    def save(self, **fields: Any) -> None:
        """Record ``fields`` and the job's identity and sessions, and write the file."""
        self.data.update(fields)
        self.data.update(
            task=self.job.task.name,
            task_dir=str(self.job.task.path),
            method=self.job.method,
            seed=self.job.seed,
            sessions=[{"start": s.start, "end": s.end} for s in self.sessions],
            updated=time.time(),
        )
        write_json(self.path, self.data)

    def start_session(self) -> None:
        """Open a session of the run (saved at once)."""
        self.sessions.append(Session(start=time.time()))
        self.save()

    def end_session(self) -> None:
        """Close the open session, if any (saved at once)."""
        if self.sessions and self.sessions[-1].end is None:
            self.sessions[-1].end = time.time()
        self.save()


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


@dataclass(frozen=True)
class JobResult:
    """How one job ended: ``done`` or ``failed`` (with its error's first lines)."""

    status: str
    message: str = ""


@dataclass(frozen=True)
class OpenEvolveSpec:
    """Where and which OpenEvolve a job installs and runs (what a remote worker needs)."""

    venv: Path | None
    version: str
    timeout_s: float | None


@dataclass(frozen=True)
class BenchShared:
    """What every job of one bench invocation shares, built once by `run_bench`.

    Both executors run a job through it (`run`): the local one in this process, the Ray
    one on a worker, which receives it with ``runners`` cut to the job's own method
    (`for_job`), so that only that runner is pickled.

    Attributes:
        runners: method name → its runner.
        graph_methods: the methods that are runs of our graph (the injected chat model,
            when there is one, goes to these only).
        endpoint / config / llm_factory / searcher_factory: as in `JobContext`.
        model_info: the model's manifest entry (name, sha256, edit format).
        versions: package versions recorded with every finished run.
        openevolve: which OpenEvolve the OpenEvolve jobs install and run.
    """

    runners: Mapping[str, MethodRunner]
    graph_methods: frozenset[str]
    endpoint: Endpoint | None
    config: EvoDuetConfig
    model_info: dict[str, Any]
    versions: dict[str, Any]
    llm_factory: LLMFactory | None
    searcher_factory: SearcherFactory | None
    openevolve: OpenEvolveSpec

    def for_job(self, job: Job) -> BenchShared:
        """This, with ``runners`` cut to the job's method (what a Ray worker is sent)."""
        return replace(self, runners={job.method: self.runners[job.method]})

    def run(
        self, job: Job, *, openevolve: Callable[[], Any], state: RunState, log: LogFn
    ) -> JobResult:
        """Run ``job`` with `execute_job` (its failure recorded and returned, never raised)."""
        ctx = JobContext(
            job,
            endpoint=self.endpoint,
            config=self.config,
            llm_factory=self.llm_factory if job.method in self.graph_methods else None,
            searcher_factory=self.searcher_factory,
            openevolve=openevolve,
            state=state,
            log=log,
            openevolve_timeout_s=self.openevolve.timeout_s,
        )
        return execute_job(ctx, self.runners[job.method], self.versions, self.model_info)


def execute_job(
    ctx: JobContext, runner: MethodRunner, versions: dict[str, Any], model_info: dict[str, Any]
) -> JobResult:
    """Run one job, recording its status, outcome or error in its ``bench_run.json``.

    The same for every executor: a run's failure is recorded and returned, never raised;
    KeyboardInterrupt propagates (the next invocation resumes the run).
    """
    job, state, say = ctx.job, ctx.state, ctx.log
    say(f"run  {job.label}: {job.iterations} iterations")
    injected = ctx.llm_factory is not None
    state.save(
        status="running",
        iterations=job.iterations,
        model="injected chat model" if injected else model_info.get("model"),
    )
    start = time.monotonic()
    sha = None if injected else model_info.get("model_sha256")
    try:
        outcome = runner(ctx)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a run's failure is recorded
        message = f"{type(exc).__name__}: {exc}"
        state.end_session()
        state.save(
            status="failed",
            error=message[-4000:],
            traceback=traceback.format_exc()[-8000:],
            versions=versions,
            model_sha256=sha,
        )
        say(f"FAIL {job.label}: {message.splitlines()[0][:300]}")
        return JobResult("failed", message)
    run_versions = dict(versions)
    if job.method == "openevolve":
        run_versions["openevolve"] = outcome.details.get("openevolve_version")
    state.save(
        status="done",
        error=None,
        traceback=None,
        outcome=outcome.to_json(),
        versions=run_versions,
        model_sha256=sha,
    )
    ndg = floored_ndg(job.task, outcome.best)
    say(
        f"done {job.label}: best={fmt(outcome.best)} "
        f"NDG={fmt(ndg, '.2f')}% in {time.monotonic() - start:.1f} s"
    )
    return JobResult("done")
