"""Parallel generation and evaluation: does N candidates per iteration cost N× the wall time?

Two modes.

**Fake model (default).** A chat model that sleeps ``--llm-sleep`` seconds (default 1) per call
and answers with a full rewrite of the evolve block, and a task whose evaluator sleeps
``--eval-sleep`` seconds (default 1) before scoring. The evaluator runs through the real
`SandboxEvaluator` (one child process per candidate, rlimits, scrubbed environment), so
evaluation parallelism is real. Gate ``never``: one LLM call per candidate. Every case runs
``--iterations`` iterations (default 3) on the same machine in the same process:

* ``N=1`` — the reference;
* ``N=8`` with ``max_concurrency`` and ``evaluation.workers`` ≥ 8 (the target: ≤ 1.5× N=1);
* ``N=8`` with LangGraph's default thread pool (``min(32, cores + 4)`` workers, what a graph
  invoked without ``max_concurrency`` gets) and the default ``evaluation.workers`` (4): shows
  why the knobs matter on a small machine.

Per case it prints the wall time of every iteration (from one ``record`` to the next), the
mean, the generate and evaluate phases (from ``events.jsonl``) and the ratio to N=1.

**Embedded model (``--local-model``).** The default ``llm.model`` (Qwen2.5-Coder-1.5B Q4_K_M
run in-process by llama.cpp) on ``tasks/smoke_polygon_area``, N=1, 2, 4 candidates, one
iteration each, ``llm.max_tokens`` 256, gate ``never``. `LocalChatModel` serialises requests
(one llama.cpp context, one lock), so N candidates cost about N model calls back to back; the
mode prints per case the iteration's wall time, its ratio to N=1, the summed model time and
the summed time the calls waited for the lock. It loads the model: run it under
``flock /tmp/evoduet_model.lock`` where several jobs share a machine.

Run from the repository root::

    .venv/bin/python benchmarks/parallel_bench.py [--iterations 3] [--json OUT.json]
    flock /tmp/evoduet_model.lock .venv/bin/python benchmarks/parallel_bench.py --local-model

Exit code 0 when the fake-model target (N=8 ≤ 1.5× N=1) is met, 1 when it is missed; the
``--local-model`` mode only reports (exit 0).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evoduet_graph import EvoDuetConfig, load_task, run
from evoduet_graph.rundir.events import read_events
from tests.fakes import ScriptedChatModel

TARGET_RATIO = 1.5
"""The target: N=8 candidates per iteration take at most this multiple of N=1."""

LANGGRAPH_DEFAULT_POOL = min(32, (os.cpu_count() or 1) + 4)
"""Threads of the pool a LangGraph graph gets when invoked without ``max_concurrency``
(``concurrent.futures.ThreadPoolExecutor``'s default)."""

INITIAL_PROGRAM = """\
# EVOLVE-BLOCK-START
VALUE = 0
# EVOLVE-BLOCK-END


def value():
    return VALUE
"""

EVALUATOR = """\
import importlib.util
import time

SLEEP_S = {sleep_s!r}


def evaluate(program_path):
    time.sleep(SLEEP_S)
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    v = float(module.value())
    return {{"value": v, "combined_score": 1.0 / (1.0 + abs(v - 1000.0) / 1000.0)}}
"""

TASK_YAML = """\
name: sleep_{tag}
direction: max
metric: value
timeout_s: 60
instruction: Set VALUE as close to 1000 as you can.
"""


def write_sleep_task(folder: Path, eval_sleep_s: float) -> Path:
    """Write a task folder whose evaluator sleeps ``eval_sleep_s`` seconds, then scores.

    Returns:
        ``folder`` (created), holding ``initial_program.py``, ``evaluator.py``, ``task.yaml``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_program.py").write_text(INITIAL_PROGRAM, encoding="utf-8")
    (folder / "evaluator.py").write_text(EVALUATOR.format(sleep_s=eval_sleep_s), encoding="utf-8")
    tag = f"{eval_sleep_s:g}".replace(".", "_")
    (folder / "task.yaml").write_text(TASK_YAML.format(tag=tag), encoding="utf-8")
    return folder


class SleepyRewriter:
    """Answer of the fake model: sleep, then a full rewrite with a fresh ``VALUE``.

    Every call returns a different program (a process-wide counter), so no two candidates share
    a code hash and none is served from the evaluation cache.
    """

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, messages: list[Any]) -> str:
        time.sleep(self.sleep_s)
        with self._lock:
            n = next(self._counter)
        program = INITIAL_PROGRAM.replace("VALUE = 0", f"VALUE = {10 * n}")
        return f"```python\n{program}```\n"


class LlmCallTimes(BaseCallbackHandler):
    """Collects ``latency_s`` and ``lock_wait_s`` of every `LocalChatModel` reply."""

    def __init__(self) -> None:
        self.calls: list[dict[str, float]] = []
        self._lock = threading.Lock()

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for generations in response.generations:
            for gen in generations:
                meta = getattr(getattr(gen, "message", None), "response_metadata", None) or {}
                usage = getattr(getattr(gen, "message", None), "usage_metadata", None) or {}
                if "latency_s" in meta:
                    with self._lock:
                        self.calls.append(
                            {
                                "latency_s": float(meta["latency_s"]),
                                "lock_wait_s": float(meta.get("lock_wait_s", 0.0)),
                                "input_tokens": int(usage.get("input_tokens", 0)),
                                "output_tokens": int(usage.get("output_tokens", 0)),
                            }
                        )


def clear_kv_cache(llm: Any) -> None:
    """Drop the llama.cpp context's evaluated tokens.

    Drop the llama.cpp context's evaluated tokens, so the next call evaluates its whole
    prompt (llama-cpp-python reuses the longest prefix shared with the previous call).
    """
    loaded = getattr(llm, "_loaded", None)
    if loaded is not None:
        with loaded.lock:
            loaded.llama.reset()


def phases(events_path: Path) -> dict[int, dict[str, float]]:
    """Wall times per iteration.

    Per iteration: ``generate_s`` (first generate start → last generate end),
    ``generate_max_s`` (longest single generate node), ``evaluate_s`` (the evaluate node).
    """
    out: dict[int, dict[str, float]] = {}
    gen_spans: dict[int, list[tuple[float, float]]] = {}
    for ev in read_events(events_path):
        if ev.get("event") != "node" or not isinstance(ev.get("iteration"), int):
            continue
        it, elapsed, end = ev["iteration"], float(ev.get("elapsed_s", 0.0)), float(ev["time"])
        if ev.get("node") == "generate":
            gen_spans.setdefault(it, []).append((end - elapsed, end))
        elif ev.get("node") == "evaluate":
            out.setdefault(it, {})["evaluate_s"] = elapsed
    for it, spans in gen_spans.items():
        entry = out.setdefault(it, {})
        entry["generate_s"] = max(e for _, e in spans) - min(s for s, _ in spans)
        entry["generate_max_s"] = max(e - s for s, e in spans)
    return out


def run_case(
    task_dir: Path,
    run_dir: Path,
    *,
    candidates: int,
    iterations: int,
    workers: int,
    max_concurrency: int | None,
    llm: Any,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run; returns per-iteration wall times (s) and phases.

    Iteration k's wall time runs from the end of ``record`` of iteration k-1 (``initialize``
    for k = 1) to the end of ``record`` of iteration k, as the graph's update stream reports
    them to the caller.
    """
    data: dict[str, Any] = {
        "iterations": iterations,
        "candidates": candidates,
        "gate": {"mode": "never"},
        "prompt": {"diff_based": False},
        "population": {"num_islands": 1},
        "evaluation": {"workers": workers},
        "max_consecutive_failures": iterations + 1,
        "max_concurrency": max_concurrency,
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    cfg = EvoDuetConfig.model_validate(data)
    marks: list[float] = []

    def progress(node: str, _update: dict[str, Any]) -> None:
        if node in ("initialize", "record"):
            marks.append(time.perf_counter())

    start = time.perf_counter()
    result = run(load_task(task_dir), cfg, llm=llm, run_dir=run_dir, progress=progress)
    total = time.perf_counter() - start
    walls = [b - a for a, b in itertools.pairwise(marks)]
    per_phase = phases(run_dir / "events.jsonl")
    statuses = [c.get("status") for h in result.history for c in h.get("candidates", [])]
    return {
        "candidates": candidates,
        "workers": workers,
        "max_concurrency": max_concurrency,
        "iteration_walls_s": [round(w, 3) for w in walls],
        "mean_s": round(statistics.fmean(walls), 3) if walls else None,
        "phases": {str(k): {n: round(v, 3) for n, v in p.items()} for k, p in per_phase.items()},
        "evaluated": statuses.count("evaluated"),
        "total_s": round(total, 2),
        "best_score": result.best_score,
    }


def fmt_case(label: str, case: dict[str, Any], reference: dict[str, Any] | None) -> str:
    walls = " ".join(f"{w:5.2f}" for w in case["iteration_walls_s"])
    gen = statistics.fmean(p.get("generate_s", 0.0) for p in case["phases"].values())
    ev = statistics.fmean(p.get("evaluate_s", 0.0) for p in case["phases"].values())
    ratio = ""
    if reference is not None and reference["mean_s"]:
        ratio = f"  ratio {case['mean_s'] / reference['mean_s']:.2f}x"
    return (
        f"{label:<44} iterations [{walls}] s  mean {case['mean_s']:5.2f} s  "
        f"(generate {gen:4.2f} s, evaluate {ev:4.2f} s, evaluated {case['evaluated']}){ratio}"
    )


def fake_mode(args: argparse.Namespace) -> int:
    print(
        f"parallel_bench (fake model): llm sleep {args.llm_sleep:g} s/call, evaluator sleep "
        f"{args.eval_sleep:g} s, {args.iterations} iterations per case, {os.cpu_count()} cores, "
        f"LangGraph default pool {LANGGRAPH_DEFAULT_POOL} threads",
        flush=True,
    )
    n = args.candidates
    cases = [
        ("N=1 (reference)", 1, max(n, 8), max(n, 8)),
        (f"N={n}, max_concurrency={max(n, 8)}, workers={max(n, 8)}", n, max(n, 8), max(n, 8)),
        (f"N={n}, LangGraph default pool, workers=4", n, 4, LANGGRAPH_DEFAULT_POOL),
    ]
    results: dict[str, Any] = {"mode": "fake", "cores": os.cpu_count(), "cases": []}
    with tempfile.TemporaryDirectory(prefix="evoduet-parallel-") as tmp:
        task_dir = write_sleep_task(Path(tmp) / "task", args.eval_sleep)
        reference = None
        for i, (label, cands, workers, max_conc) in enumerate(cases):
            llm = ScriptedChatModel(responses=[], default=SleepyRewriter(args.llm_sleep))
            case = run_case(
                task_dir,
                Path(tmp) / f"run{i}",
                candidates=cands,
                iterations=args.iterations,
                workers=workers,
                max_concurrency=max_conc,
                llm=llm,
            )
            case["label"] = label
            reference = reference or case
            print(fmt_case(label, case, reference if case is not reference else None), flush=True)
            results["cases"].append(case)
    ref, tuned = results["cases"][0], results["cases"][1]
    ratio = tuned["mean_s"] / ref["mean_s"]
    results["ratio"] = round(ratio, 3)
    results["target"] = TARGET_RATIO
    met = ratio <= TARGET_RATIO
    print(
        f"N={n} / N=1 wall time per iteration: {ratio:.2f}x (target <= {TARGET_RATIO}x): "
        f"{'met' if met else 'MISSED'}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0 if met else 1


def local_mode(args: argparse.Namespace) -> int:
    from evoduet_graph.config import LLMConfig
    from evoduet_graph.llm import make_chat_model

    llm_cfg = LLMConfig(max_tokens=args.max_tokens)
    load_start = time.perf_counter()
    llm = make_chat_model(llm_cfg)
    load_s = time.perf_counter() - load_start
    calls = LlmCallTimes()
    llm = llm.model_copy(update={"callbacks": [calls]})
    task_dir = ROOT / "tasks" / "smoke_polygon_area"
    print(
        f"parallel_bench (embedded model): {type(llm).__name__} {llm_cfg.model}, max_tokens "
        f"{args.max_tokens}, n_threads {getattr(llm, 'n_threads', '?')}, {os.cpu_count()} cores, "
        f"model load {load_s:.1f} s (not counted); task {task_dir.name}, 1 iteration per case",
        flush=True,
    )
    results: dict[str, Any] = {"mode": "local", "cores": os.cpu_count(), "cases": []}
    reference = None
    with tempfile.TemporaryDirectory(prefix="evoduet-parallel-local-") as tmp:
        for n in args.local_candidates:
            calls.calls.clear()
            clear_kv_cache(llm)  # every case starts cold, like an iteration with a new parent
            case = run_case(
                task_dir,
                Path(tmp) / f"run{n}",
                candidates=n,
                iterations=1,
                workers=max(n, 4),
                max_concurrency=max(n, 8),
                llm=llm,
                extra={"llm": {"max_tokens": args.max_tokens}},
            )
            case["llm_calls"] = len(calls.calls)
            case["llm_latency_sum_s"] = round(sum(c["latency_s"] for c in calls.calls), 2)
            case["lock_wait_sum_s"] = round(sum(c["lock_wait_s"] for c in calls.calls), 2)
            case["model_compute_s"] = round(case["llm_latency_sum_s"] - case["lock_wait_sum_s"], 2)
            case["output_tokens"] = sum(c["output_tokens"] for c in calls.calls)
            case["per_call"] = [
                {
                    "compute_s": round(c["latency_s"] - c["lock_wait_s"], 2),
                    "lock_wait_s": round(c["lock_wait_s"], 2),
                    "input_tokens": c["input_tokens"],
                    "output_tokens": c["output_tokens"],
                }
                for c in sorted(calls.calls, key=lambda c: c["lock_wait_s"])
            ]
            reference = reference or case
            ratio = case["mean_s"] / reference["mean_s"]
            case["ratio"] = round(ratio, 3)
            case["label"] = f"N={n}"
            print(
                f"N={n}: iteration {case['mean_s']:6.1f} s  ratio {ratio:4.2f}x  "
                f"(LLM calls {case['llm_calls']}, model compute {case['model_compute_s']:.1f} s, "
                f"lock wait {case['lock_wait_sum_s']:.1f} s summed over calls, "
                f"{case['output_tokens']} output tokens, evaluated {case['evaluated']})",
                flush=True,
            )
            per_call = ", ".join(
                f"{c['compute_s']:.1f} s ({c['input_tokens']} in / {c['output_tokens']} out)"
                for c in case["per_call"]
            )
            print(f"      calls in lock order: {per_call}", flush=True)
            results["cases"].append(case)
    print(
        "LocalChatModel serialises requests (one llama.cpp context behind one lock): the N "
        "calls of an iteration run one after another. The first pays the prompt evaluation; "
        "the others share its prompt, whose evaluated prefix llama.cpp reuses, and pay only "
        "their generated tokens."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=textwrap.dedent(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--iterations", type=int, default=3, help="iterations per case (fake)")
    parser.add_argument("--candidates", type=int, default=8, help="N of the parallel cases")
    parser.add_argument("--llm-sleep", type=float, default=1.0, help="fake model s per call")
    parser.add_argument("--eval-sleep", type=float, default=1.0, help="evaluator s per program")
    parser.add_argument("--local-model", action="store_true", help="use the embedded model")
    parser.add_argument(
        "--local-candidates", type=int, nargs="+", default=[1, 2, 4], help="N values (local)"
    )
    parser.add_argument("--max-tokens", type=int, default=256, help="llm.max_tokens (local)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.candidates < 1:
        parser.error("--iterations and --candidates must be >= 1")
    return local_mode(args) if args.local_model else fake_mode(args)


if __name__ == "__main__":
    sys.exit(main())
