"""The population-state descriptor on a small hand-made population.

The population-state descriptor (`evoduet_graph.prompts.descriptor.population_descriptor`) on a
small hand-made population whose figures are worked out by hand below.
"""

from __future__ import annotations

from evoduet_graph.prompts.descriptor import population_descriptor
from tests.conftest import SMOKE_TASK
from tests.node_env import Env, add_program, make_env

# id: (iteration, parent, score, valid, error); "d" failed and never joined the population
PROGRAMS: dict[str, tuple[int, str | None, float | None, bool, str | None]] = {
    "initial": (0, None, 0.2, True, None),
    "a": (1, "initial", 0.6, True, None),
    "b": (2, "a", 0.4, True, None),
    "c": (3, "a", 1.0, True, None),
    "d": (4, "c", None, False, "no SEARCH/REPLACE block or code block found"),
    "e": (5, "a", 0.5, True, None),
}


def hand_made_env() -> Env:
    """Programs of ``PROGRAMS`` in the store; the valid ones in a top-k population."""
    env = make_env(SMOKE_TASK, seeded=False, population__kind="top_k")
    for pid, (iteration, parent, score, _valid, error) in PROGRAMS.items():
        code = None if error else f"def run():\n    return {pid!r}\n"
        add_program(env, pid, code, score, iteration, parent_id=parent, error=error)
    return env


def test_descriptor_states_the_population_figures() -> None:
    env = hand_made_env()
    # during iteration 6; the last new best (c, score 1.0) came in iteration 3
    state = {"iteration": 6, "best_score": 1.0, "last_improvement_iteration": 3}

    text = population_descriptor(env.ctx, state)

    # scores sorted: 0.2 0.4 0.5 0.6 1.0 -> quantiles at positions 0, 1, 2, 3, 4 of the sorted
    # list; mean 2.7 / 5 = 0.54. Since the last improvement: iterations 4 and 5 = 2.
    # Outcomes newest first, parent score -> child score; d's parent c is not consulted.
    # Parents of all attempts: a (b, c, e) x3, initial (a) x1, c (d) x1; ties by id.
    assert text.splitlines() == [
        "population size: 5",
        "scores (higher is better): min 0.2, q25 0.4, median 0.5, q75 0.6, max 1, mean 0.54",
        "best score so far: 1",
        "iterations since last improvement: 2",
        "recent parent -> child outcomes:",
        "  iteration 5: 0.6 -> 0.5",
        "  iteration 4: invalid (no SEARCH/REPLACE block or code block found)",
        "  iteration 3: 0.6 -> 1",
        "  iteration 2: 0.6 -> 0.4",
        "  iteration 1: 0.2 -> 0.6",
        "most selected parents: a x3, c x1, initial x1",
    ]
    assert population_descriptor(env.ctx, state) == text  # deterministic


def test_descriptor_only_shows_attempts_before_the_iteration() -> None:
    env = hand_made_env()
    text = population_descriptor(
        env.ctx, {"iteration": 3, "best_score": 0.6, "last_improvement_iteration": 1}
    )
    lines = text.splitlines()
    outcomes = lines[lines.index("recent parent -> child outcomes:") + 1 : -1]
    assert outcomes == ["  iteration 2: 0.6 -> 0.4", "  iteration 1: 0.2 -> 0.6"]
    assert "iterations since last improvement: 1" in lines  # iteration 2 did not improve


def test_descriptor_of_an_empty_run() -> None:
    env = make_env(SMOKE_TASK, seeded=False)
    assert population_descriptor(env.ctx, {}) == (
        "population size: 0\nbest score so far: n/a\niterations since last improvement: 0"
    )
