"""Framework overhead per iteration, ours vs OpenEvolve, measured side by side in one run.

Both frameworks talk to the same instant OpenAI-compatible server on loopback
(`benchmarks.overhead.canned_server`: valid SEARCH/REPLACE diffs, JSON for our knowledge
prompts) and evaluate the same trivial task (`benchmarks.overhead.trivial_task`: the score is a
hash of one line; the evaluator times itself). What is left of the wall time is the
framework's own cost:

    framework ms / iteration = (window wall − server handling time − evaluator body time) / W

over the window of W iterations ending at 200, 1,000 and 5,000 completed iterations (one run
per method to the largest count; iteration completion times from our ``events.jsonl`` and from
OpenEvolve's evolution trace). Methods:

* ``evoduet-never`` — our outer graph, gate ``never`` (select → gate → generate → evaluate →
  record, LangGraph SqliteSaver checkpoint after every step);
* ``evoduet-always`` — gate ``always``: every iteration also runs the inner query-evolution
  loop (3 rounds of construct_query → search → hypothetical_score → update_knowledge; 7 model
  calls per iteration) against an instant fake search backend;
* ``openevolve`` — the real ``openevolve`` package (its own venv, its defaults: 4 worker
  processes, checkpoint every 100 iterations, INFO logging).

Our runs evaluate in-process (like OpenEvolve, which imports the evaluator in its workers); our
production sandbox (one subprocess per candidate) is timed separately with ``--sandbox N``.

    python benchmarks/overhead_bench.py                      # 200, 1000, 5000 (make bench-overhead)
    python benchmarks/overhead_bench.py --iterations 200,1000 --methods evoduet-never,openevolve

Prints a table and writes ``overhead.json`` + ``overhead.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import itertools

from benchmarks.overhead.trivial_task import write_task

METHODS = ("evoduet-never", "evoduet-always", "openevolve")
TARGET_MS = 5.0
FLAT_RATIO = 1.5


@dataclass
class Window:
    """Figures of the W iterations that end at ``iteration``."""

    iteration: int
    window: int
    wall_s: float
    server_s: float
    eval_s: float
    requests: int

    @property
    def iterations_per_s(self) -> float:
        return self.window / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def framework_ms(self) -> float:
        return max(0.0, self.wall_s - self.server_s - self.eval_s) / self.window * 1000.0


@dataclass
class MethodResult:
    method: str
    iterations: int
    total_wall_s: float
    startup_s: float
    windows: list[Window] = field(default_factory=list)
    bytes: dict[str, int] = field(default_factory=dict)
    growth: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------
# measurement helpers
# ------------------------------------------------------------------------------------------


class Server:
    """The canned server as a subprocess (its work never takes our process's GIL)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.overhead.canned_server"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.proc.kill()
            raise RuntimeError(f"canned server did not start: {line!r}")
        self.port = int(line.split()[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def _call(self, method: str, path: str) -> dict[str, Any]:
        import urllib.request

        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=b"{}" if method == "POST" else None,
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def reset(self) -> None:
        self._call("POST", "/reset")

    def log(self) -> list[tuple[float, float]]:
        return [tuple(x) for x in self._call("GET", "/stats")["log"]]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def read_eval_log(path: Path) -> list[tuple[float, float]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((float(parts[0]), float(parts[1])))
    return rows


def windows(
    done: list[float],
    points: list[int],
    width: int,
    server: list[tuple[float, float]],
    evals: list[tuple[float, float]],
) -> list[Window]:
    """Windows of ``width`` iterations ending at each of ``points`` (completion times sorted)."""
    done = sorted(done)
    server = sorted(server)
    evals = sorted(evals)
    s_times = [t for t, _ in server]
    e_times = [t for t, _ in evals]
    out = []
    for n in points:
        if n > len(done) or n <= width:
            continue
        t0, t1 = done[n - width - 1], done[n - 1]
        s_lo, s_hi = bisect.bisect_right(s_times, t0), bisect.bisect_right(s_times, t1)
        e_lo, e_hi = bisect.bisect_right(e_times, t0), bisect.bisect_right(e_times, t1)
        out.append(
            Window(
                iteration=n,
                window=width,
                wall_s=t1 - t0,
                server_s=sum(d for _, d in server[s_lo:s_hi]),
                eval_s=sum(d for _, d in evals[e_lo:e_hi]),
                requests=s_hi - s_lo,
            )
        )
    return out


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------------------
# the methods
# ------------------------------------------------------------------------------------------


def run_ours(
    method: str, n: int, points: list[int], width: int, server: Server, work: Path
) -> MethodResult:
    from evoduet_graph import EvoDuetConfig, load_task, run
    from evoduet_graph.rundir.events import read_events
    from tests.fakes import FakeSearcher
    from tests.fault_harness import InProcessEvaluator

    task_dir = write_task(work / "task")
    eval_log = work / "eval.log"
    os.environ["OVERHEAD_EVAL_LOG"] = str(eval_log)
    gate = "always" if method.endswith("always") else "never"
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": n,
            "seed": 42,
            "gate": {"mode": gate},
            "prompt": {"diff_based": True},
            "llm": {
                "model": "openai:canned",
                "base_url": server.base_url,
                "max_retries": 0,
                "timeout_s": 30,
            },
            "retrieval": {"backend": "none" if gate == "never" else "offline"},
            "max_consecutive_failures": n + 1,
        }
    )
    server.reset()
    run_dir = work / "run"
    marks = sorted({p - width for p in points if p > width} | set(points) | {10, 20})
    sizes: dict[int, dict[str, int]] = {}
    recorded = [0]

    def progress(node: str, update: dict[str, Any]) -> None:
        if node != "record":
            return
        recorded[0] += 1
        if recorded[0] in marks:
            sizes[recorded[0]] = store_sizes(run_dir)

    start = time.time()
    result = run(
        load_task(task_dir),
        cfg,
        evaluator=InProcessEvaluator(task_dir),
        run_dir=run_dir,
        searcher=FakeSearcher() if gate == "always" else None,
        progress=progress,
    )
    total = time.time() - start
    done = [
        e["time"]
        for e in read_events(run_dir / "events.jsonl")
        if e.get("event") == "node" and e.get("node") == "record"
    ]
    first_select = next(
        (e["time"] for e in read_events(run_dir / "events.jsonl") if e.get("node") == "select"),
        start,
    )
    out = MethodResult(method, result.iterations, total, first_select - start)
    out.windows = windows(done, points, width, server.log(), read_eval_log(eval_log))
    out.bytes = {
        "checkpoints.sqlite": dir_bytes_glob(run_dir, "checkpoints.sqlite*"),
        "programs.sqlite": dir_bytes_glob(run_dir, "programs.sqlite*"),
        "run_dir": dir_bytes(run_dir),
    }
    out.growth = growth(sizes, [10, *points], width)
    return out


def store_sizes(run_dir: Path) -> dict[str, int]:
    """Logical bytes held by the checkpoint database and the program store.

    Logical bytes held by the checkpoint database and the program store (the sum of the
    stored values' lengths: file sizes move in pages and WAL checkpoints, too coarse for a
    per-iteration figure).
    """
    import sqlite3

    queries = {
        "checkpoints.sqlite": [
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints",
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes",
        ],
        "programs.sqlite": [
            (
                "SELECT COALESCE(SUM(LENGTH(code) + LENGTH(metrics) + LENGTH(artifacts)"
                " + COALESCE(LENGTH(error), 0) + 100), 0) FROM programs"
            ),
            "SELECT COALESCE(SUM(LENGTH(outcome) + 64), 0) FROM evaluations",
            "SELECT COALESCE(SUM(LENGTH(data)), 0) FROM population",
            "SELECT COALESCE(SUM(LENGTH(op)), 0) FROM population_ops",
        ],
    }
    out = {}
    for name, sqls in queries.items():
        conn = sqlite3.connect(f"file:{run_dir / name}?mode=ro", uri=True)
        try:
            out[name] = sum(int(conn.execute(q).fetchone()[0]) for q in sqls)
        finally:
            conn.close()
    return out


def growth(sizes: dict[int, dict[str, int]], points: list[int], width: int) -> list[dict]:
    """Bytes added per iteration over the window ending at each point.

    Bytes added per iteration over the window ending at each point (10: iterations 11-20,
    the start of the run, when the population is small).
    """
    rows = []
    for n in points:
        lo, hi = (10, 20) if n == 10 else (n - width, n)
        if lo in sizes and hi in sizes:
            rows.append(
                {
                    "iteration": hi,
                    **{k: (sizes[hi][k] - sizes[lo][k]) / (hi - lo) for k in sizes[hi]},
                }
            )
    return rows


def dir_bytes_glob(folder: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in folder.glob(pattern) if p.is_file())


def run_openevolve(
    n: int, points: list[int], width: int, server: Server, work: Path
) -> MethodResult:
    import yaml

    from evoduet_graph import load_task
    from evoduet_graph.bench.common import Endpoint
    from evoduet_graph.bench.openevolve_method import (
        ensure_openevolve,
        openevolve_command,
        openevolve_config,
        read_trace,
    )

    env = ensure_openevolve(log=lambda msg: print(f"  [openevolve venv] {msg}", flush=True))
    task = load_task(write_task(work / "task"))
    eval_log = work / "eval.log"
    trace = work / "trace.jsonl"
    endpoint = Endpoint(model="canned", base_url=server.base_url, max_retries=0, timeout_s=30)
    cfg = openevolve_config(task, iterations=n, seed=42, endpoint=endpoint, trace_path=trace)
    cfg["checkpoint_interval"] = 100  # OpenEvolve's default (the bench's harness uses 1)
    config_path = work / "config.yaml"
    config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out_dir = work / "output"
    cmd = openevolve_command(env, task, config_path=config_path, output_dir=out_dir, iterations=n)
    proc_env = dict(os.environ, OVERHEAD_EVAL_LOG=str(eval_log), PYTHONDONTWRITEBYTECODE="1")
    for name in ("PYTHONPATH", "VIRTUAL_ENV"):
        proc_env.pop(name, None)
    server.reset()
    start = time.time()
    with open(work / "openevolve.log", "wb") as log:
        proc = subprocess.run(
            cmd, cwd=work, env=proc_env, stdout=log, stderr=subprocess.STDOUT, check=False
        )
    total = time.time() - start
    records = read_trace(trace)
    done = [r.timestamp for r in records]
    out = MethodResult("openevolve", len(records), total, (min(done) - start) if done else total)
    if proc.returncode != 0:
        tail = (work / "openevolve.log").read_text(errors="replace")[-2000:]
        out.notes.append(f"openevolve exited {proc.returncode}: {tail}")
    out.windows = windows(done, points, width, server.log(), read_eval_log(eval_log))
    out.bytes = {"output": dir_bytes(out_dir) if out_dir.exists() else 0}
    out.notes.append(f"openevolve {env.version}")
    return out


def run_sandbox_check(n: int, server: Server, work: Path) -> dict[str, Any]:
    """Our graph with the production sandbox (a subprocess per candidate), for the record."""
    from evoduet_graph import EvoDuetConfig, load_task, run
    from evoduet_graph.rundir.store import ProgramStore

    task_dir = write_task(work / "task")
    cfg = EvoDuetConfig.model_validate(
        {
            "iterations": n,
            "gate": {"mode": "never"},
            "prompt": {"diff_based": True},
            "llm": {"model": "openai:canned", "base_url": server.base_url, "max_retries": 0},
            "retrieval": {"backend": "none"},
            "max_consecutive_failures": n + 1,
        }
    )
    start = time.time()
    result = run(load_task(task_dir), cfg, run_dir=work / "run")
    wall = time.time() - start
    store = ProgramStore(work / "run" / "programs.sqlite")
    elapsed = [
        json.loads(o)["elapsed_s"]
        for (o,) in store._conn.execute("SELECT outcome FROM evaluations").fetchall()
    ]
    store.close()
    return {
        "iterations": result.iterations,
        "wall_s": wall,
        "iterations_per_s": result.iterations / wall,
        "sandbox_ms_per_candidate": 1000 * sum(elapsed) / max(1, len(elapsed)),
    }


def reference_figures(server: Server, work: Path, n: int = 300) -> dict[str, float]:
    """What a framework built on LangGraph and LangChain cannot go below, measured here.

    * ``langgraph_loop_ms`` — one iteration of a bare 5-node LangGraph loop (select → gate →
      generate → evaluate → record doing nothing) with the same SqliteSaver settings as ours
      (WAL, synchronous=NORMAL, a checkpoint after every step);
    * ``chatopenai_ms`` / ``openai_sdk_ms`` — one chat call with a ~3 kB prompt through
      LangChain's ``ChatOpenAI`` / the bare ``openai`` client against the canned server, minus
      the server's own handling time (the client side of a model call).
    """
    import sqlite3
    from typing import TypedDict

    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from openai import OpenAI

    class LoopState(TypedDict, total=False):
        i: int
        note: str

    names = ["select", "gate", "generate", "evaluate", "record"]
    graph = StateGraph(LoopState)
    for name in names[:-1]:
        graph.add_node(name, lambda state, _n=name: {"note": _n})
    graph.add_node("record", lambda state: {"i": state.get("i", 0) + 1})
    graph.add_edge(START, "select")
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    graph.add_conditional_edges("record", lambda state: END if state["i"] >= n else "select")
    conn = sqlite3.connect(work / "loop.sqlite", check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    app = graph.compile(checkpointer=SqliteSaver(conn))
    start = time.perf_counter()
    app.invoke({"i": 0}, {"configurable": {"thread_id": "t"}, "recursion_limit": 10 * n})
    loop_ms = (time.perf_counter() - start) / n * 1000
    conn.close()

    prompt = [
        {"role": "system", "content": "You improve programs. " * 20},
        {"role": "user", "content": '## Current program\nSALT = "x"\n' + "x" * 2500},
    ]
    chat = ChatOpenAI(model="canned", base_url=server.base_url, api_key="none", max_retries=0)
    sdk = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
    figures = {"langgraph_loop_ms": loop_ms}
    for name, call in (
        ("chatopenai_ms", lambda: chat.invoke([(m["role"], m["content"]) for m in prompt])),
        ("openai_sdk_ms", lambda: sdk.chat.completions.create(model="canned", messages=prompt)),
    ):
        call()
        server.reset()
        start = time.perf_counter()
        for _ in range(n):
            call()
        wall = time.perf_counter() - start
        figures[name] = (wall - sum(d for _, d in server.log())) / n * 1000
    return figures


# ------------------------------------------------------------------------------------------
# report
# ------------------------------------------------------------------------------------------


def table(results: list[MethodResult], points: list[int]) -> list[str]:
    oe = {w.iteration: w for r in results if r.method == "openevolve" for w in r.windows}
    lines = [
        (
            "| method | at iteration | it/s | framework ms/it | server ms/it | eval ms/it "
            "| ours/OpenEvolve (framework ms) |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for w in r.windows:
            ratio = ""
            if r.method != "openevolve" and w.iteration in oe and oe[w.iteration].framework_ms:
                ratio = f"{w.framework_ms / oe[w.iteration].framework_ms:.2f}"
            lines.append(
                f"| {r.method} | {w.iteration} | {w.iterations_per_s:.1f} | "
                f"{w.framework_ms:.2f} | {1000 * w.server_s / w.window:.2f} | "
                f"{1000 * w.eval_s / w.window:.3f} | {ratio} |"
            )
    return lines


def verdicts(results: list[MethodResult]) -> list[str]:
    out = []
    for r in results:
        if r.method == "openevolve" or len(r.windows) < 2:
            continue
        first, last = r.windows[0], r.windows[-1]
        flat = last.framework_ms / first.framework_ms if first.framework_ms else float("nan")
        worst = max(w.framework_ms for w in r.windows)
        out.append(
            f"{r.method}: worst window {worst:.2f} ms/it (target ≤ {TARGET_MS:.0f}: "
            f"{'met' if worst <= TARGET_MS else 'MISSED'}); flatness "
            f"{last.iteration}/{first.iteration} = {flat:.2f} (target ≤ {FLAT_RATIO}: "
            f"{'met' if flat <= FLAT_RATIO else 'MISSED'})"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="framework overhead: ours vs OpenEvolve")
    parser.add_argument(
        "--iterations",
        default="200,1000,5000",
        help="window end points; each method runs to the largest",
    )
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--window", type=int, default=100, help="iterations per window")
    parser.add_argument(
        "--always-max",
        type=int,
        default=1000,
        help="evoduet-always runs at most this many iterations (it costs ~20x "
        "more per iteration: 5,000 would take ~15 minutes)",
    )
    parser.add_argument(
        "--sandbox",
        type=int,
        default=50,
        help="iterations of the extra run with our production sandbox (0: skip)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/overhead")
    args = parser.parse_args()
    points = sorted({int(x) for x in args.iterations.split(",") if x.strip()})
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    n = max(points)
    width = min(args.window, max(1, min(points) // 2))
    args.out.mkdir(parents=True, exist_ok=True)
    server = Server()
    results: list[MethodResult] = []
    sandbox: dict[str, Any] | None = None
    refs: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="evoduet_overhead_") as tmp:
            for method in methods:
                work = Path(tmp) / method
                work.mkdir()
                print(f"running {method} ...", flush=True)
                if method == "openevolve":
                    res = run_openevolve(n, points, width, server, work)
                elif method == "evoduet-always" and n > args.always_max:
                    capped = [p for p in points if p <= args.always_max] or [args.always_max]
                    res = run_ours(method, max(capped), capped, width, server, work)
                else:
                    res = run_ours(method, n, points, width, server, work)
                results.append(res)
                print(
                    f"  {res.iterations} iterations in {res.total_wall_s:.1f} s "
                    f"(startup {res.startup_s:.1f} s) {res.bytes}",
                    flush=True,
                )
                for note in res.notes:
                    print(f"  note: {note[:500]}", flush=True)
            work = Path(tmp) / "reference"
            work.mkdir()
            refs = reference_figures(server, work)
            if args.sandbox:
                work = Path(tmp) / "sandbox"
                work.mkdir()
                print(
                    f"running evoduet-never with the sandbox for {args.sandbox} iterations ...",
                    flush=True,
                )
                sandbox = run_sandbox_check(args.sandbox, server, work)
    finally:
        server.close()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [f"# Framework overhead (window {width} iterations; {machine})", ""]
    lines += table(results, points)
    lines += [""] + [f"- {v}" for v in verdicts(results)]
    if refs:
        lines.append(
            f"- reference floor measured in this run: a bare 5-node LangGraph loop with the same "
            f"SqliteSaver {refs['langgraph_loop_ms']:.2f} ms/it; the client side of one model "
            f"call {refs['chatopenai_ms']:.2f} ms through LangChain's ChatOpenAI, "
            f"{refs['openai_sdk_ms']:.2f} ms through the bare openai client"
        )
    if sandbox:
        lines.append(
            f"- with the production sandbox: {sandbox['iterations_per_s']:.1f} it/s, "
            f"{sandbox['sandbox_ms_per_candidate']:.1f} ms per candidate in the sandbox "
            f"({sandbox['iterations']} iterations)"
        )
    growth_rows = [(r.method, g) for r in results for g in r.growth]
    if growth_rows:
        lines += [
            "",
            "Bytes added per iteration (window ending at the iteration):",
            "",
            "| method | at iteration | checkpoints.sqlite B/it | programs.sqlite B/it |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {m} | {g['iteration']} | {g['checkpoints.sqlite']:.0f} | "
            f"{g['programs.sqlite']:.0f} |"
            for m, g in growth_rows
        ]
        lines.append("")
    for r in results:
        if r.bytes:
            lines.append(
                f"- {r.method}: {r.iterations} iterations, total {r.total_wall_s:.1f} s, "
                f"startup {r.startup_s:.1f} s, files {r.bytes}"
            )
    text = "\n".join(lines)
    print(text)
    (args.out / "overhead.md").write_text(text + "\n")
    (args.out / "overhead.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "window": width,
                "results": [
                    {
                        **asdict(r),
                        "windows": [
                            {
                                **asdict(w),
                                "iterations_per_s": w.iterations_per_s,
                                "framework_ms": w.framework_ms,
                            }
                            for w in r.windows
                        ],
                    }
                    for r in results
                ],
                "sandbox": sandbox,
                "reference": refs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
