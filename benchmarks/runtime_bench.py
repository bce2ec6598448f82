"""The embedded runtime: tokens/s of each CPU variant, and the cost of the worker process.

Two measurements, one run:

1. **CPU variants.** For each CPU-variant module of the installed portable build (and, with
   ``--native-site DIR``, a native build unpacked there: ``python -m zipfile -e WHEEL DIR``),
   a child process loads the embedded model with that variant forced (``EVODUET_LLAMA_CPU``)
   and, ``--repeats`` times in round-robin order, evaluates the real mutation prompt of
   ``circle_packing_26`` (a full-rewrite prompt for its initial program, ~1,100 tokens) from an
   empty context and writes 128 tokens greedily. Prompt and generation tokens/s come from
   llama.cpp's own perf counters; the table gives the median and each variant's prompt speed
   relative to the fastest variant that ran (the best safe build) and marks the variant the
   default (runtime dispatch) picks on this machine.
2. **The worker boundary.** ``--calls`` mutation calls of the product's model (defaults:
   worker process, ``llm.max_tokens`` 1024, temperature 0.7, seeds 0..), each reporting
   ``ipc_s``: the caller's wait outside the worker's engine (pickling, the socket, the
   threads). Its share of the call's wall time bounds its share of a no-op iteration, which is
   two calls (gate, mutation) and an evaluation. The worker's start (spawn, imports, loading,
   one decoded token) is timed against loading in-process.

Run it alone on the machine (it loads the model several times); the load average is printed
and saved. From the repository root::

    .venv/bin/python benchmarks/runtime_bench.py [--native-site DIR] [--repeats 2]
        [--variants zen4,skylakex,haswell] [--calls 5]
        [--json benchmarks/results/embedded/runtime_bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model, runtime
from evoduet_graph.llm.model_file import assemble_model

TASK = ROOT / "tasks" / "circle_packing_26"
GEN_TOKENS = 128


def _child(model_path: str, repeats: int) -> None:
    """In the child: load with the forced variant, time prompt and generation ``repeats`` times."""
    import llama_cpp
    from batch_bench import generation_prompt

    variant = runtime.load_cpu_backend()
    llama = llama_cpp.Llama(
        model_path=model_path,
        n_ctx=4096,
        n_batch=512,
        n_threads=os.cpu_count(),
        n_threads_batch=os.cpu_count(),
        verbose=False,
    )
    messages, _task = generation_prompt(TASK)
    payload = [
        {"role": "system" if m.type == "system" else "user", "content": m.content} for m in messages
    ]
    results = []
    for _ in range(repeats):
        llama.reset()
        llama._ctx.kv_cache_seq_rm(0, 0, -1)
        ctx = llama._ctx.ctx
        llama_cpp.llama_perf_context_reset(ctx)
        llama.create_chat_completion(
            messages=payload, max_tokens=GEN_TOKENS, temperature=0.0, logit_bias=None
        )
        perf = llama_cpp.llama_perf_context(ctx)
        results.append(
            {
                "prompt_tokens": perf.n_p_eval,
                "prompt_tok_s": perf.n_p_eval / (perf.t_p_eval_ms / 1000.0),
                "gen_tokens": perf.n_eval,
                "gen_tok_s": perf.n_eval / (perf.t_eval_ms / 1000.0) if perf.n_eval else 0.0,
            }
        )
    print(json.dumps({"variant": variant, "runs": results}), flush=True)


def measure(variant: str | None, model: Path, repeats: int, site: str | None) -> dict:
    env = dict(os.environ)
    if variant:
        env[runtime.VARIANT_ENV] = variant
    if site:
        env["PYTHONPATH"] = os.pathsep.join([site, str(ROOT)])
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(model), str(repeats)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        return {"error": f"{runtime.describe_exit(proc.returncode)}: {proc.stderr[-400:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def variants_table(
    model: Path, repeats: int, native_site: str | None, only: list[str] | None
) -> list[dict]:
    info = runtime.runtime_info()
    chosen = [v for v in info.variants if only is None or v in only]
    cases: list[tuple[str, str | None, str | None]] = [(v, v, None) for v in chosen]
    if native_site:
        cases.append(("native", None, native_site))
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in cases}
    for _ in range(repeats):  # round-robin: a slow minute of the machine hits every case
        for name, variant, site in cases:
            result = measure(variant, model, 1, site)
            runs[name].append(result)
            print(f"  {name}: {result}", flush=True)
    rows = []
    for name, variant, _ in cases:
        ok = [r["runs"][0] for r in runs[name] if "runs" in r]
        rows.append(
            {
                "build": name,
                "default_choice": variant is not None and variant == info.chosen,
                "prompt_tokens": ok[0]["prompt_tokens"] if ok else None,
                "prompt_tok_s": [round(r["prompt_tok_s"], 1) for r in ok],
                "gen_tok_s": [round(r["gen_tok_s"], 1) for r in ok],
                "errors": [r["error"] for r in runs[name] if "error" in r],
            }
        )
    best = max((statistics.median(r["prompt_tok_s"]) for r in rows if r["prompt_tok_s"]), default=0)
    for row in rows:
        if row["prompt_tok_s"]:
            row["prompt_vs_best"] = round(statistics.median(row["prompt_tok_s"]) / best, 3)
    return rows


def worker_boundary(calls: int) -> dict:
    from batch_bench import generation_prompt

    messages, _task = generation_prompt(TASK)
    started = time.perf_counter()
    in_process = make_local_chat_model(LLMConfig(model="local", local_isolation="none"))
    load_in_process = time.perf_counter() - started
    del in_process
    started = time.perf_counter()
    model = make_local_chat_model(LLMConfig(model="local"))
    load_worker = time.perf_counter() - started
    rows = []
    for seed in range(calls):
        t0 = time.perf_counter()
        reply = model.bind(seed=seed).invoke(messages)
        wall = time.perf_counter() - t0
        meta = reply.response_metadata
        rows.append(
            {
                "seed": seed,
                "wall_s": round(wall, 3),
                "ipc_s": meta["ipc_s"],
                "output_tokens": reply.usage_metadata["output_tokens"],
            }
        )
        print(f"  call {seed}: {rows[-1]}", flush=True)
    share = [r["ipc_s"] / r["wall_s"] for r in rows]
    return {
        "load_in_process_s": round(load_in_process, 2),
        "start_worker_s": round(load_worker, 2),
        "calls": rows,
        "median_ipc_ms": round(statistics.median(r["ipc_s"] for r in rows) * 1000, 3),
        "max_ipc_share_of_call": round(max(share), 6),
        "bound_share_of_noop_iteration": round(
            2 * max(r["ipc_s"] for r in rows) / min(r["wall_s"] for r in rows), 6
        ),
    }


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native-site", help="a native build's wheel unpacked here")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--skip-variants", action="store_true")
    parser.add_argument(
        "--variants",
        help="comma-separated CPU variants to time (default: all; x64, without SIMD, takes "
        "over 15 minutes a prompt on 2 cores)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    model = assemble_model()
    info = runtime.runtime_info()
    load_before = [round(x, 2) for x in os.getloadavg()]
    print(
        f"runtime: llama-cpp-python {info.version}, {info.flavour}, variants {info.variants}, "
        f"default {info.chosen}; CPU {info.cpu}, {os.cpu_count()} cores; load {load_before}"
    )
    only = args.variants.split(",") if args.variants else None
    rows = [] if args.skip_variants else variants_table(model, args.repeats, args.native_site, only)
    print(f"\n{'build':<10} {'default':<8} {'prompt tok/s':<16} {'vs best':<8} gen tok/s")
    for row in rows:
        print(
            f"{row['build']:<10} {'yes' if row['default_choice'] else '':<8} "
            f"{str(row['prompt_tok_s']):<16} {row.get('prompt_vs_best', '-')!s:<8} "
            f"{row['gen_tok_s']} {'; '.join(row['errors'])}"
        )
    boundary = worker_boundary(args.calls) if args.calls else {}
    if boundary:
        print(
            f"\nworker: start {boundary['start_worker_s']} s (in-process load "
            f"{boundary['load_in_process_s']} s); boundary per call median "
            f"{boundary['median_ipc_ms']} ms, at most {boundary['max_ipc_share_of_call']:.4%} of "
            "a mutation call; bound per no-op iteration "
            f"{boundary['bound_share_of_noop_iteration']:.4%}"
        )
    load_after = [round(x, 2) for x in os.getloadavg()]
    print(f"load after: {load_after}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "machine": {
                        "cpu": info.cpu,
                        "cores": os.cpu_count(),
                        "python": platform.python_version(),
                    },
                    "runtime": {
                        "version": info.version,
                        "flavour": info.flavour,
                        "variants": list(info.variants),
                        "default": info.chosen,
                    },
                    "loadavg_before": load_before,
                    "loadavg_after": load_after,
                    "variants": rows,
                    "worker": boundary,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
