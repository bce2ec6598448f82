"""Our graph as a bench method.

Our graph as a bench method: the configuration a method name stands for (a built-in method,
a row of the ablation ladder or any configuration file), the run on the bench's endpoint, and
the figures read back from its run directory (`graph_outcome`). The real OpenEvolve is the
other kind of method (`evoduet_graph.bench.openevolve_method`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

import evoduet_graph
from evoduet_graph import (
    MODEL_DOWN_PREFIX,
    EvoDuetConfig,
    Task,
    can_retrieve,
    make_checked_searcher,
    merge_config,
    paper_metrics,
    run,
    run_summary,
)
from evoduet_graph.bench.common import (
    BenchError,
    Explored,
    IterationSeries,
    MethodOutcome,
    Session,
    best_by_fitness,
)
from evoduet_graph.bench.endpoint import endpoint_chat_model
from evoduet_graph.bench.jobs import JobContext, MethodRunner
from evoduet_graph.rundir import layout
from evoduet_graph.rundir.events import read_events
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.rundir.usage import usage_by_iteration
from evoduet_graph.search.base import normalize_url

# ------------------------------------------------------------------------------------------
# our graph's methods
# ------------------------------------------------------------------------------------------


def _graph_config(ctx: JobContext, overlay: dict[str, Any], source: str) -> EvoDuetConfig:
    """The job's configuration.

    The job's configuration: ``overlay`` over the bench's base (`merge_config`), with the
    bench's iterations and seed, and diffs as the task's OpenEvolve config asks unless the
    base sets ``prompt.diff_based``.
    """
    job = ctx.job
    cfg = merge_config(ctx.config, overlay, source)
    overrides: dict[str, Any] = {"iterations": job.iterations, "seed": job.seed}
    if cfg.prompt.diff_based is None:
        overrides["prompt.diff_based"] = bool(
            job.task.openevolve_config.get("diff_based_evolution", True)
        )
    return cfg.with_overrides(overrides)


def method_configs_dir() -> Path:
    """Where a method config named by its stem is found: ``./configs``, else the repository's."""
    if Path("configs").is_dir():
        return Path("configs")
    return Path(evoduet_graph.__file__).resolve().parent.parent / "configs"


def config_method(
    name: str, configs_dir: Path | None = None
) -> tuple[str, dict[str, Any], Path] | None:
    """A method given as a configuration file.

    A ``.yaml``/``.yml`` path, or the stem of a file in ``configs_dir`` (default ``./configs`` if it
    exists, else the repository's).

    Returns:
        ``(label, overlay, path)`` — the label is the file's stem (the job folder's name),
        the overlay the file's mapping without ``iterations`` and ``seed`` — or None when
        ``name`` names no such file.

    Raises:
        BenchError: the file is not a YAML mapping, or it has an ``llm`` section.
    """
    path = Path(name).expanduser()
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        path = (configs_dir or method_configs_dir()) / f"{name}.yaml"
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


def graph_runner(name: str, overlay: dict[str, Any], source: str | None = None) -> MethodRunner:
    """The runner of one of our graph's methods: ``overlay`` over the base configuration."""

    def run_method(ctx: JobContext) -> MethodOutcome:
        job = ctx.job
        cfg = _graph_config(ctx, overlay, source or f"method {name!r}")
        gate_mode = cfg.gate.mode
        if ctx.llm_factory is not None:
            llm = ctx.llm_factory(job)
        elif ctx.endpoint is not None:
            llm = endpoint_chat_model(cfg.llm, llama_cpp_server=ctx.endpoint.local, seed=cfg.seed)
        else:
            llm = None
        searcher = None
        if can_retrieve(cfg):
            if ctx.searcher_factory is not None:
                searcher = ctx.searcher_factory(job)
            else:  # build / load the offline index here, outside the timed session
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


def _child_validity(rows: list[Any], iterations: int) -> dict[str, int]:
    """A run's ``children`` and ``valid_children``.

    Children: every candidate of iterations 1..``iterations`` (unusable answers, failed calls
    and duplicates included); valid: evaluated and accepted by the evaluator.
    """
    children = [r for r in rows if r.kind != "initial" and 1 <= r.iteration <= iterations]
    return {"children": len(children), "valid_children": sum(1 for r in children if r.valid)}


def graph_outcome(
    task: Task, run_dir: Path, iterations: int, sessions: list[Session]
) -> MethodOutcome:
    """Score one of our run directories in the bench's common terms.

    Best: the metric of the run's best program by fitness (`best_by_fitness`) over the valid
    programs in ``programs.sqlite`` (initial included). ``details["knowledge"]``: the run's
    `paper_metrics` (improvement rates by evidence, repeated-URL share, USD, search calls)
    for the summary. LLM calls and
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
    explored: list[Explored] = []
    initial: float | None = None
    for row in sorted(rows, key=lambda r: r.iteration):  # stable: creation order within one
        value = task.metric_value(row.metrics) if row.valid else None
        if value is None or row.score is None:
            continue
        explored.append(Explored(row.iteration, float(row.score), value, row.code))
        if row.id == "initial":
            initial = value
    curve, best = best_by_fitness(explored, iterations)

    events = list(read_events(run_dir / layout.EVENTS))
    stamps: dict[int, float] = {}
    for ev in events:
        raw_it = ev.get("iteration")
        it = raw_it if isinstance(raw_it, int) else 0
        is_record = ev.get("event") == "node" and ev.get("node") == "record"
        if is_record and isinstance(ev.get("time"), int | float):
            stamps[it] = float(ev["time"])
    usage = usage_by_iteration(events)
    calls_by_it = {it: u.llm_calls for it, u in usage.items()}
    tokens_by_it = {it: u.tokens for it, u in usage.items()}
    return MethodOutcome.from_series(
        IterationSeries(curve, calls_by_it, tokens_by_it, sessions, stamps, iterations),
        initial=initial,
        best=best.metric if best is not None else None,
        best_code=best.code if best is not None else None,
        details={
            "programs": len(rows),
            "valid_programs": sum(1 for p in explored if p.iteration <= iterations),
            **_child_validity(rows, iterations),
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
    events = list(read_events(run_dir / layout.EVENTS))
    search = run_summary(run_dir).search
    searches = [e for e in events if e.get("event") == "search"]
    returned = search.returned_urls
    distinct = search.distinct_urls
    if not returned:  # no D_search on disk (stateless runs): the search events
        urls = [normalize_url(str(u)) for e in searches for u in e.get("urls") or []]
        returned, distinct = len(urls), len(set(urls))
    with_docs: set[int] = set()
    for ev in events:
        it = ev.get("iteration")
        if not isinstance(it, int):
            continue
        # "retrieve": the query_evolution node in runs made before it was renamed
        if ev.get("event") == "node" and ev.get("node") in (
            "gate",
            "look_up",
            "query_evolution",
            "retrieve",
        ):
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
        "improved_without_documents": sum(1 for i in its if i not in with_docs and i in improved),
    }
