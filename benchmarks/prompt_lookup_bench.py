"""Prompt-lookup drafting on the embedded model: the mutation call with and without, one run.

For each task (default ``tasks/circle_packing_26``) the bench builds the real ``generate``
prompt for a child of the task's initial program (full rewrite, as the embedded model is asked
for: `batch_bench.generation_prompt`) and sends it to the embedded model with the product
defaults (``llm.max_tokens`` 1024, temperature 0.7, the batched decoder) once per seed, with
``llm.local_prompt_lookup`` false and true: two loaded models side by side in this process,
the two calls of a seed one after the other (off first, then on), each from an empty cache.

Per call it records output tokens, decode seconds (first sampled token to last), the writing
speed (output tokens / decode seconds) and the whole call's (output tokens / wall seconds,
prompt evaluation included), decode steps, tokens per step, drafted and accepted tokens, and
whether the reply gives a compiling child program (the ``generate`` node's parsing). It prints
the median over the seeds of the on/off ratio of the writing speed (the target: at
least 2x), and the machine's 1-minute load average before and after every call: on a shared
machine the ratio of two calls made a minute apart is only as good as the load was steady.

First it times raw ``llama_decode`` calls of one sequence that evaluate 1, 4, 8, 16 and 24
tokens after a 1,500-token context: the verify cost the drafts pay. With the measured tokens
per step this gives the ceiling the machine allows (tokens per step x cost of a 1-token step /
cost of a verify step of the mean drafted size).

Run from the repository root (it loads the model twice: run it alone, e.g. under ``flock``)::

    .venv/bin/python benchmarks/prompt_lookup_bench.py [--tasks DIR ...] [--seeds 1 2 3 4]
        [--threads T] [--max-tokens 1024] [--out benchmarks/results/prompt-lookup]

Exit code 0 when every task's median ratio is at least 2, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from batch_bench import generation_prompt, valid_child

from evoduet_graph.config import LLMConfig
from evoduet_graph.llm import make_local_chat_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TASKS = [ROOT / "tasks" / "circle_packing_26"]
TARGET = 2.0
VERIFY_SIZES = (1, 4, 8, 16, 24)


def verify_costs(model, context: int = 1500, repeats: int = 4) -> dict[int, float]:
    """Milliseconds of one ``llama_decode`` of ``k`` tokens of one sequence, per ``k``."""
    loaded = model._loaded
    backend, llama = loaded.decoder.backend, loaded.llama
    model.clear_cache()
    costs: dict[int, float] = {}
    with loaded.lock:
        prompt = list(llama.tokenize(b"def area(points):\n    return 0.0\n" * 300))[:context]
        for i in range(0, len(prompt), backend.n_batch):
            chunk = prompt[i : i + backend.n_batch]
            backend.decode([(t, i + j, 1, False) for j, t in enumerate(chunk)])
        pos = len(prompt)
        for k in VERIFY_SIZES:
            started = time.perf_counter()
            for _ in range(repeats):
                backend.decode([(1000 + j, pos + j, 1, True) for j in range(k)])
                backend.truncate(1, pos)
            costs[k] = round((time.perf_counter() - started) / repeats * 1000, 1)
        backend.seq_rm(1)
    return costs


def one_call(model, messages, task, seed: int) -> dict:
    """One mutation call from an empty cache; its figures."""
    model.clear_cache()
    load = os.getloadavg()[0]
    started = time.perf_counter()
    reply = model.bind(seed=seed).invoke(messages)
    wall = time.perf_counter() - started
    meta = reply.response_metadata
    out = reply.usage_metadata["output_tokens"]
    decode_s = float(meta["decode_s"])
    steps = int(meta["decode_steps"])
    return {
        "seed": seed,
        "output_tokens": out,
        "finish_reason": meta.get("finish_reason"),
        "wall_s": round(wall, 2),
        "prompt_eval_s": meta.get("prompt_eval_s"),
        "decode_s": round(decode_s, 2),
        "tok_per_s": round(out / decode_s, 2) if decode_s > 0 else None,
        "wall_tok_per_s": round(out / wall, 2),
        "decode_steps": steps,
        "tokens_per_step": round(out / steps, 2) if steps else None,
        "draft_tokens": meta["draft_tokens"],
        "draft_accepted": meta["draft_accepted"],
        "acceptance": round(meta["draft_accepted"] / meta["draft_tokens"], 3)
        if meta["draft_tokens"]
        else None,
        "valid_child": valid_child(task, str(reply.content)),
        "loadavg_1min_before": round(load, 2),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def _line(label: str, row: dict) -> str:
    return (
        f"  {label:<4} seed {row['seed']}  out {row['output_tokens']:4d}  "
        f"decode {row['decode_s']:6.1f} s  {row['tok_per_s']:5.1f} tok/s "
        f"(wall {row['wall_tok_per_s']:5.1f})  steps {row['decode_steps']:4d}  "
        f"{row['tokens_per_step']:.2f} tok/step  accepted {row['draft_accepted']}/"
        f"{row['draft_tokens']}  valid {row['valid_child']}  "
        f"load {row['loadavg_1min_before']}->{row['loadavg_1min_after']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="*", type=Path, default=DEFAULT_TASKS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4])
    parser.add_argument("--out", type=Path, default=None, help="write results.json here")
    parser.add_argument(
        "--threads", type=int, default=None, help="llm.local_n_threads (default: all cores)"
    )
    parser.add_argument("--max-tokens", type=int, default=1024, help="llm.max_tokens")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    models = {
        lookup: make_local_chat_model(
            LLMConfig(
                model="local",
                local_isolation="none",
                local_prompt_lookup=lookup,
                local_n_threads=args.threads,
                max_tokens=args.max_tokens,
            )
        )
        for lookup in (False, True)
    }
    costs = verify_costs(models[True])
    print(
        "verify step of one sequence (1,500-token context): "
        + ", ".join(f"{k} tok {ms:.0f} ms" for k, ms in costs.items()),
        flush=True,
    )
    ok = True
    results = []
    for task_dir in args.tasks:
        messages, task = generation_prompt(task_dir)
        print(f"{task_dir.name}:", flush=True)
        pairs = []
        for seed in args.seeds:
            off = one_call(models[False], messages, task, seed)
            print(_line("off", off), flush=True)
            on = one_call(models[True], messages, task, seed)
            print(_line("on", on), flush=True)
            pairs.append(
                {
                    "seed": seed,
                    "off": off,
                    "on": on,
                    "ratio": round(on["tok_per_s"] / off["tok_per_s"], 3),
                }
            )
        ratios = [p["ratio"] for p in pairs]
        on_rows = [p["on"] for p in pairs]
        drafted = sum(r["draft_tokens"] for r in on_rows)
        accepted = sum(r["draft_accepted"] for r in on_rows)
        per_step = sum(r["output_tokens"] for r in on_rows) / sum(
            r["decode_steps"] for r in on_rows
        )
        mean_verify = 1 + drafted / sum(r["decode_steps"] for r in on_rows)
        # cost of a verify step of the mean size, interpolated between the measured sizes
        sizes = sorted(costs)
        lo = max((k for k in sizes if k <= mean_verify), default=sizes[0])
        hi = min((k for k in sizes if k >= mean_verify), default=sizes[-1])
        cost = (
            costs[lo]
            if hi == lo
            else costs[lo] + (costs[hi] - costs[lo]) * (mean_verify - lo) / (hi - lo)
        )
        ceiling = per_step * costs[1] / cost
        summary = {
            "median_ratio": round(statistics.median(ratios), 3),
            "ratios": ratios,
            "median_tok_per_s_off": statistics.median(p["off"]["tok_per_s"] for p in pairs),
            "median_tok_per_s_on": statistics.median(p["on"]["tok_per_s"] for p in pairs),
            "acceptance": round(accepted / drafted, 3) if drafted else None,
            "tokens_per_step": round(per_step, 2),
            "mean_verify_tokens": round(mean_verify, 2),
            "ceiling_ratio": round(ceiling, 2),
            "valid_children_off": sum(p["off"]["valid_child"] for p in pairs),
            "valid_children_on": sum(p["on"]["valid_child"] for p in pairs),
        }
        print(
            f"  median ratio on/off {summary['median_ratio']:.2f} (per seed {ratios}); "
            f"{summary['median_tok_per_s_off']:.1f} -> {summary['median_tok_per_s_on']:.1f} "
            f"tok/s; accepted {summary['acceptance']} of drafted tokens, "
            f"{summary['tokens_per_step']} tokens/step, mean verify {summary['mean_verify_tokens']}"
            f" tokens; ceiling at this acceptance and verify cost {summary['ceiling_ratio']}x; "
            f"valid children off {summary['valid_children_off']}/{len(pairs)}, on "
            f"{summary['valid_children_on']}/{len(pairs)}",
            flush=True,
        )
        ok = ok and summary["median_ratio"] >= TARGET
        results.append({"task": task_dir.name, "summary": summary, "calls": pairs})
    load_after = os.getloadavg()
    print(f"load average before {load_before}, after {load_after}")
    report = {
        "bench": "prompt_lookup_bench",
        "model": "qwen2.5-coder-1.5b-instruct-q4_k_m (embedded)",
        "temperature": models[True].temperature,
        "max_tokens": models[True].max_tokens,
        "seeds": args.seeds,
        "threads": models[True].n_threads,
        "target_ratio": TARGET,
        "verify_ms": costs,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "results": results,
    }
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "results.json"
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
