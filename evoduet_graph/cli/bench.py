"""``evoduet bench``: run every (task, method, seed) of a benchmark, resumably."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from evoduet_graph import bench
from evoduet_graph.bench import BenchError, BenchSettings, resolve_tasks
from evoduet_graph.bench.protocol import load_protocol, protocol_settings
from evoduet_graph.bench.runner import parse_list
from evoduet_graph.cli.common import _fail, app, console
from evoduet_graph.cli.interrupt import interruptible
from evoduet_graph.config import load_config
from evoduet_graph.errors import UserError


@app.command("bench")
def bench_cmd(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help="Output folder (reused to resume).")],
    tasks: Annotated[
        str | None,
        typer.Option(help="Comma-separated task names (in ./tasks) or folders; default: all."),
    ] = None,
    iterations: Annotated[int, typer.Option(help="Iterations per run.")] = 10,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0,1,2",
    model: Annotated[
        str,
        typer.Option(
            help="`local` (served by llama.cpp on 127.0.0.1), `openai:<model>`, or another "
            "provider's `<provider>:<model>` (our methods only: not with openevolve)."
        ),
    ] = "local",
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated: evoduet, openevolve-mode, openevolve, evoduet-topk, "
            "evoduet-bestofn, evoduet-evox; a row of the ablation ladder (oracle, "
            "joint-search, stagnation, always, heuristic, rerank, no-query-evolution, "
            "no-search-database, select-relevance-novelty, their -full-loop variants, "
            "grounding-offline, grounding-online, parallel-8); or a config: a YAML path or a "
            "file stem in configs/ (e.g. always_retrieve, scaffold_evox)."
        ),
    ] = "evoduet,openevolve-mode,openevolve",
    config: Annotated[
        Path | None, typer.Option(help="Base YAML config of our methods (and llm settings).")
    ] = None,
    openevolve_version: Annotated[
        str | None, typer.Option(help="OpenEvolve release to install (default: pinned).")
    ] = None,
    openevolve_venv: Annotated[
        Path | None, typer.Option(help="OpenEvolve's virtual environment (default: cache).")
    ] = None,
    openevolve_timeout: Annotated[
        float | None, typer.Option(help="Wall limit (s) of one OpenEvolve process.")
    ] = None,
    protocol: Annotated[
        Path | None,
        typer.Option(
            help="A protocol YAML (e.g. benchmarks/protocols/paper.yaml): tasks, methods, "
            "seeds, iterations, candidates, model, search backend, executor and base config "
            "in one file; it replaces --tasks, --methods, --seeds, --iterations, --model and "
            "--config. The same command resumes it."
        ),
    ] = None,
    executor: Annotated[
        str | None,
        typer.Option(
            help="local (one run after another; default) or ray (each run a Ray task; "
            "RAY_ADDRESS joins a cluster, else a local Ray instance starts)."
        ),
    ] = None,
) -> None:
    """Run every (task, method, seed), resumably; write results.csv, summary.md and plots.

    Ctrl-C or SIGTERM ends it within seconds, a model call in flight or not
    (`evoduet_graph.cli.interrupt`); the same command resumes.
    """
    with interruptible("run the same command again to resume"):
        try:
            try:
                seed_list = [int(s) for s in parse_list(seeds)]
            except ValueError:
                raise BenchError(
                    f"--seeds {seeds!r}: expected comma-separated integers, e.g. --seeds 0,1,2"
                ) from None
            if protocol is not None:
                sources = {
                    name: getattr(ctx.get_parameter_source(name), "name", None)
                    for name in ("tasks", "methods", "seeds", "iterations", "model", "config")
                }
                given = [f"--{name}" for name, where in sources.items() if where == "COMMANDLINE"]
                if given:
                    raise BenchError(
                        f"--protocol replaces {', '.join(given)}: give one or the other"
                    )
                settings = protocol_settings(load_protocol(protocol), out, source=str(protocol))
            else:
                settings = BenchSettings(
                    tasks=resolve_tasks(parse_list(tasks) or None),
                    out=out,
                    methods=parse_list(methods),
                    seeds=seed_list,
                    iterations=iterations,
                    model=model,
                    config=load_config(config),
                )
            settings = dataclasses.replace(
                settings,
                openevolve_version=openevolve_version,
                openevolve_venv=openevolve_venv,
                openevolve_timeout_s=openevolve_timeout,
                executor=executor or settings.executor,
            )
            start = time.perf_counter()
            # looked up at call time, so a replaced bench.run_bench is the one called
            result = bench.run_bench(settings, log=lambda msg: console.print(msg, markup=False))
        except (ValueError, UserError) as exc:
            _fail(str(exc))
    console.print(
        f"[bold green]bench done[/] in {time.perf_counter() - start:.1f} s: "
        f"{len(result.ran)} run, {len(result.skipped)} skipped, {len(result.failed)} failed"
    )
    for path in (result.results_csv, result.runs_csv, result.summary_md, *result.plots):
        console.print(f"  {path}")
    if result.summary_md is not None:
        sys.stdout.write(result.summary_md.read_text(encoding="utf-8"))
    if result.failed:
        raise typer.Exit(1)
