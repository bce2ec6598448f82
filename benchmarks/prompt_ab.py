"""A/B of the mutation prompt: the prompt of the package on ``PYTHONPATH`` vs another tree's.

First iteration of ``tasks/smoke_polygon_area`` (the initial program as parent, no attempts, no
top programs), the embedded model on its sequential path (``local_parallel: 1``), seeds 1..6 set
per call: the only difference between two runs of this script on two trees is the prompt the
tree's builder writes. Each reply's child is written to ``OUT/<label>-seed<k>.py`` for
``evoduet eval tasks/smoke_polygon_area FILE``; one JSON line per seed on stdout.

Run it with the root of the tree whose prompt to measure as the working directory (the
package is imported from there), e.g. the tree from before the shared prefix (``6c1fefb``,
whose builder is ``evoduet_graph.prompting``) and this one::

    cd <old checkout> && PYTHONPATH=. python <this checkout>/benchmarks/prompt_ab.py before OUT
    python benchmarks/prompt_ab.py after OUT
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from evoduet_graph.config import LLMConfig, PromptConfig
from evoduet_graph.llm import make_local_chat_model
from evoduet_graph.task import load_task

TASK = "tasks/smoke_polygon_area"


def messages_and_parser(task):
    """The first-iteration mutation prompt of the imported tree and its rewrite parser."""
    try:  # the tree from before the package's subpackages and the shared context c_t
        from evoduet_graph.diffs import candidate_from_response
        from evoduet_graph.prompting import ProgramView, build_generation_messages

        parent = ProgramView("initial", task.initial_program, task.initial_score or 0.0, {}, 0)
        messages = build_generation_messages(
            instruction=task.instruction,
            parent=parent,
            top=[],
            inspirations=[],
            attempts=[],
            evidence=[],
            cfg=PromptConfig(diff_based=False),
            metric_name=task.metric,
            direction=task.direction,
            language=task.lang,
        )
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import batch_bench

        from evoduet_graph.candidates.diffs import candidate_from_response

        messages, _ = batch_bench.generation_prompt(Path(TASK))
    return messages, candidate_from_response


def main() -> int:
    """Six seeded replies to the imported tree's prompt; children written for evaluation."""
    label, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    task = load_task(TASK)
    messages, parse = messages_and_parser(task)
    model = make_local_chat_model(LLMConfig(model="local", local_parallel=1))
    for seed in range(1, 7):
        started = time.time()
        reply = model.bind(seed=seed).invoke(messages)
        cand = parse(
            task.initial_program,
            str(reply.content),
            diff_based=False,
            restrict_to_evolve_blocks=task.has_evolve_blocks,
            language=task.language,
        )
        if cand.code is not None and cand.error is None:
            (out / f"{label}-seed{seed}.py").write_text(cand.code, encoding="utf-8")
        record = {
            "label": label,
            "seed": seed,
            "wall_s": round(time.time() - started, 1),
            "error": cand.error,
            "output_tokens": reply.usage_metadata["output_tokens"]
            if reply.usage_metadata
            else None,
        }
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
