"""Batched candidates on the embedded model: N=1 vs N=4 generate calls, same prompt, one process.

For each task (default ``tasks/smoke_polygon_area`` and
``tasks/circle_packing_26``) the bench builds the real ``generate`` prompt for a child of the
task's initial program (`evoduet_graph.prompting.build_generation_messages`, full rewrite as
the embedded model is asked for) and sends it to the embedded model (product defaults:
``llm.max_tokens`` 1024, temperature 0.7, `make_local_chat_model`) as N concurrent calls, one
thread per candidate with seeds ``seed..seed+N-1`` — what the ``generate`` node's N
``Send``s do. With ``llm.local_parallel`` > 1 (the default) these decode as one llama.cpp
batch (`evoduet_graph.llm.batching`); ``--sequential`` runs the same cases with
``local_parallel: 1`` (one call after another, the behaviour before batching) for reference.

Every case starts with an empty prompt cache, so N=1 and N=4 both pay the prompt evaluation.
First it times raw decode steps with 1, 2 and 4 sequences after an 800- and a 2400-token
shared context (``--steps``): the kernel cost that batching works with. Per case it prints
wall time, CPU time of the process, prompt tokens evaluated and shared, output tokens per sequence,
aggregate output tokens/s, how many replies give a compiling child program (the ``generate``
node's parsing, `candidate_from_response` + `compile_error`), and the ratio of N=4 to N=1
wall time (the target set for batching: ≤ 1.5×). The machine's load average before and after is
recorded. It loads the model: run it alone on the machine (e.g. under ``flock``).

Run from the repository root::

    .venv/bin/python benchmarks/batch_bench.py [--tasks DIR ...] [--n 1 4] [--seed 0]
        [--sequential] [--json benchmarks/results/embedded/batch_bench.json]

Exit code 0 when every task meets N=4 ≤ 1.5× N=1 (batched mode), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evoduet_graph.candidates.diffs import candidate_from_response
from evoduet_graph.config import LLMConfig, PromptConfig
from evoduet_graph.llm import make_local_chat_model
from evoduet_graph.nodes.generate import compile_error
from evoduet_graph.prompts.generate import (
    ProgramView,
    build_generation_messages,
    context_message_text,
    system_message_text,
)
from evoduet_graph.task import load_task

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TASKS = [ROOT / "tasks" / "smoke_polygon_area", ROOT / "tasks" / "circle_packing_26"]
TARGET = 1.5


def generation_prompt(task_dir: Path) -> tuple[list, object]:
    """The ``generate`` node's messages for a child of the task's initial program."""
    task = load_task(task_dir)
    parent = ProgramView(
        id="it00000-c0",
        code=task.initial_program,
        score=task.initial_score or 0.0,
        metrics={},
        iteration=0,
    )
    context = context_message_text(
        parent=parent, top=[], inspirations=[], attempts=[], cfg=PromptConfig(), language=task.lang
    )
    messages = build_generation_messages(
        system=system_message_text(task.instruction, task.lang),
        context=context,
        parent=parent,
        evidence=[],
        cfg=PromptConfig(diff_based=False),
        metric_name=task.metric,
        direction=task.direction,
        language=task.lang,
    )
    return messages, task


def valid_child(task, text: str) -> bool:
    """Whether the reply yields a child program the ``generate`` node would evaluate."""
    cand = candidate_from_response(
        task.initial_program,
        text,
        diff_based=False,
        restrict_to_evolve_blocks=task.has_evolve_blocks,
        language=task.language,
    )
    return (
        cand.code is not None and cand.error is None and not compile_error(task.language, cand.code)
    )


def run_case(model, messages, task, n: int, seed: int) -> dict:
    """N concurrent calls of one prompt with seeds seed..seed+n-1; the case's figures."""
    model.clear_cache()
    load = os.getloadavg()[0]
    cpu0 = time.process_time()
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        replies = list(pool.map(lambda i: model.bind(seed=seed + i).invoke(messages), range(n)))
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    out = [r.usage_metadata["output_tokens"] for r in replies]
    prompt = [r.usage_metadata["input_tokens"] for r in replies]
    reused = [
        (r.usage_metadata.get("input_token_details") or {}).get("cache_read", 0) for r in replies
    ]
    return {
        "n": n,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),  # this process, all threads: less sensitive to other load
        "loadavg_1min_at_start": round(load, 2),
        "prompt_tokens": prompt[0],
        "prompt_tokens_evaluated": sum(p - c for p, c in zip(prompt, reused, strict=True)),
        "output_tokens": out,
        "output_tok_per_s": round(sum(out) / wall, 2),
        "finish_reasons": [r.response_metadata.get("finish_reason") for r in replies],
        "batch_size": [r.response_metadata.get("batch_size") for r in replies],
        "valid_children": sum(valid_child(task, str(r.content)) for r in replies),
        "distinct_replies": len({str(r.content) for r in replies}),
    }


def step_costs(model, sizes: list[int], context: int, steps: int = 16) -> list[dict]:
    """Cost of one decode step with ``b`` sequences, for each ``b`` in ``sizes``.

    Raw ``llama_decode`` calls (no sampling, no Python scheduling) after a shared ``context``-token
    prompt, the kernel cost batching works with (``llama-server --parallel`` runs the same).
    """
    loaded = model._loaded
    backend, llama = loaded.decoder.backend, loaded.llama
    model.clear_cache()
    with loaded.lock:
        prompt = list(llama.tokenize(b"def area(points):\n    return 0.0\n" * 400))[:context]
        for i in range(0, len(prompt), backend.n_batch):
            chunk = prompt[i : i + backend.n_batch]
            backend.decode([(t, i + j, 1, False) for j, t in enumerate(chunk)])
        for seq in range(2, max(sizes) + 1):
            backend.seq_cp(1, seq, len(prompt))
        rows = []
        for b in sizes:
            pos = len(prompt)
            cpu0, t0 = time.process_time(), time.perf_counter()
            for k in range(steps):
                backend.decode([(1000 + k, pos + k, s, True) for s in range(1, b + 1)])
            wall = (time.perf_counter() - t0) / steps
            cpu = (time.process_time() - cpu0) / steps
            for seq in range(1, b + 1):
                llama._ctx.kv_cache_seq_rm(seq, pos, -1)
            rows.append(
                {
                    "sequences": b,
                    "ms_per_step": round(wall * 1000, 1),
                    "cpu_ms_per_step": round(cpu * 1000, 1),
                    "tok_per_s": round(b / wall, 2),
                }
            )
        for seq in range(1, max(sizes) + 1):
            backend.seq_rm(seq)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="*", type=Path, default=DEFAULT_TASKS)
    parser.add_argument("--n", nargs="+", type=int, default=[1, 4])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sequential", action="store_true", help="local_parallel: 1")
    parser.add_argument(
        "--steps",
        nargs="*",
        type=int,
        default=[1, 2, 4, 1, 4],
        help="also time raw decode steps with these sequence counts (none: skip)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)

    cfg = LLMConfig(  # in-process: the step timings read the loaded Llama directly
        model="local",
        local_parallel=1 if args.sequential else max(args.n),
        local_isolation="none",
    )
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    model = make_local_chat_model(cfg)
    load_s = time.perf_counter() - t0
    results = []
    ok = True
    steps = []
    if args.steps and not args.sequential:
        for context in (800, 2400):
            for row in step_costs(model, args.steps, context):
                row["context"] = context
                steps.append(row)
                print(
                    f"decode step, {context}-token context, {row['sequences']} sequence(s): "
                    f"{row['ms_per_step']:.0f} ms ({row['cpu_ms_per_step']:.0f} ms CPU), "
                    f"{row['tok_per_s']:.1f} tok/s",
                    flush=True,
                )
    for task_dir in args.tasks:
        messages, task = generation_prompt(task_dir)
        cases = [run_case(model, messages, task, n, args.seed) for n in args.n]
        base = cases[0]["wall_s"]
        for case in cases:
            case["ratio_to_first"] = round(case["wall_s"] / base, 3)
            print(
                f"{task_dir.name:<22} N={case['n']}  wall {case['wall_s']:7.1f} s  "
                f"(CPU {case['cpu_s']:.0f} s, load {case['loadavg_1min_at_start']})  "
                f"ratio {case['ratio_to_first']:.2f}  prompt {case['prompt_tokens']} tok "
                f"(evaluated {case['prompt_tokens_evaluated']})  out {case['output_tokens']}  "
                f"{case['output_tok_per_s']:.1f} tok/s  valid {case['valid_children']}/"
                f"{case['n']}  distinct {case['distinct_replies']}",
                flush=True,
            )
        last = cases[-1]
        if not args.sequential and last["ratio_to_first"] > TARGET:
            ok = False
        results.append({"task": task_dir.name, "cases": cases})
    load_after = os.getloadavg()
    report = {
        "bench": "batch_bench",
        "mode": "sequential (local_parallel 1)" if args.sequential else "batched",
        "model": "qwen2.5-coder-1.5b-instruct-q4_k_m (embedded)",
        "max_tokens": cfg.max_tokens,
        "temperature": cfg.temperature,
        "seed": args.seed,
        "model_load_s": round(load_s, 2),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "target_ratio": TARGET,
        "decode_steps": steps,
        "results": results,
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
