"""The embedded-model benches build their prompts with the product's own builders.

``benchmarks/batch_bench.py`` times ``generate``'s prompt on the embedded model; a bench whose
prompt builder fell out of step with the package would only fail minutes into a real run.
"""

from __future__ import annotations

from tests.conftest import ROOT, load_script


def _load(name: str):
    return load_script(ROOT / "benchmarks" / f"{name}.py")


def test_batch_bench_prompt_is_the_generate_prompt_of_the_initial_program() -> None:
    bench = _load("batch_bench")
    messages, task = bench.generation_prompt(ROOT / "tasks" / "smoke_polygon_area")
    system, message = messages
    assert str(system.content).startswith("You are an expert programmer")  # the run's system
    assert task.instruction.splitlines()[0] in str(system.content)
    text = str(message.content)
    assert text.startswith("## Current program")  # the shared context c_t
    assert task.initial_program.strip().splitlines()[0] in text
    assert "## Output format" in text
    assert "## Recent attempts" not in text  # none yet: the section is left out


def test_batch_bench_counts_a_reply_with_the_program_as_a_valid_child() -> None:
    bench = _load("batch_bench")
    _, task = bench.generation_prompt(ROOT / "tasks" / "smoke_polygon_area")
    fence = task.lang.fence
    child = task.initial_program.replace("radius = 0.6", "radius = 1.0")
    assert child != task.initial_program
    assert bench.valid_child(task, f"```{fence}\n{child}```")
    assert not bench.valid_child(task, f"```{fence}\n{task.initial_program}```")  # no change
    assert not bench.valid_child(task, "no code here")


def test_embedded_bench_splits_the_gate_ratio_by_decision() -> None:
    bench = _load("embedded_bench")
    cases = {
        "gate never N=1": {"s_per_iteration": 20.0, "iteration_walls_s": [20.0, 20.0, 20.0]},
        "gate llm N=1": {
            "iteration_walls_s": [25.0, 35.0, 140.0],
            "iteration_decisions": ["no-op", "no-op", "retrieve"],
        },
    }
    groups = bench.by_decision(cases)
    assert groups == {
        "no-op": {"iterations": 2, "mean_s": 30.0, "ratio": 1.5},
        "retrieve": {"iterations": 1, "mean_s": 140.0, "ratio": 7.0},
    }
    table = "\n".join(bench.by_decision_lines(cases))
    assert "| no-op | 2 | 30.0 | 1.5 |" in table and "| retrieve | 1 | 140.0 | 7.0 |" in table
    # an iteration whose decision is not known: no split rather than a wrong one
    cases["gate llm N=1"]["iteration_decisions"] = ["no-op"]
    assert bench.by_decision(cases) == {} and bench.by_decision_lines(cases) == []
