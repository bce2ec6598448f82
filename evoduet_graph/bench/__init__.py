"""``evoduet bench``: EvoDuet against OpenEvolve on the same tasks, seeds and model.

``evoduet bench``: EvoDuet vs the OpenEvolve baseline (our graph, gate ``never``) vs the real
OpenEvolve package, on the same tasks, seeds and model.

See `evoduet_graph.bench.runner` for the output folder and resumption rules,
`evoduet_graph.bench.jobs` for what one (task, method, seed) run is,
`evoduet_graph.bench.server` for the local llama.cpp server and
`evoduet_graph.bench.openevolve_method` for how OpenEvolve is installed and driven.
"""

from __future__ import annotations

from evoduet_graph.bench.common import (
    BenchError,
    Endpoint,
    IterationPoint,
    MethodOutcome,
    floored_ndg,
)
from evoduet_graph.bench.jobs import (
    DEFAULT_SEEDS,
    METHODS,
    BenchResult,
    BenchSettings,
    Job,
    JobContext,
)
from evoduet_graph.bench.runner import resolve_tasks, run_bench

__all__ = [
    "DEFAULT_SEEDS",
    "METHODS",
    "BenchError",
    "BenchResult",
    "BenchSettings",
    "Endpoint",
    "IterationPoint",
    "Job",
    "JobContext",
    "MethodOutcome",
    "floored_ndg",
    "resolve_tasks",
    "run_bench",
]
