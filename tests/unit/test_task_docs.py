"""The bundled tasks' ``docs/`` folders: the offline corpus's task knowledge (docs/design.md §5).

Every bundled task ships a few short documents we wrote that describe methods known to work on
its problem, each naming its source in a header line, and never the values of a best-known
solution. The offline backend indexes them for a run on that task.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from evoduet_graph.config import RetrievalConfig
from evoduet_graph.search import make_searcher

TASKS = Path(__file__).resolve().parents[2] / "tasks"
BUNDLED = sorted(p.name for p in TASKS.iterdir() if (p / "evaluator.py").is_file())

# a literal list of eight or more numbers: coordinates or heights of a solution
NUMBER_LIST = re.compile(r"(-?\d+\.\d+\s*,\s*){7,}-?\d+\.\d+")


def _docs(name: str) -> list[Path]:
    return sorted((TASKS / name / "docs").glob("*.md"))


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_task_has_docs_with_a_source_line(name: str) -> None:
    docs = _docs(name)
    assert len(docs) >= 2, f"tasks/{name}/docs/ needs a few method documents"
    for path in docs:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# ") and len(lines[0]) > 10, f"{path}: a '# title' first"
        source = next((line for line in lines[1:4] if line.startswith("Source: ")), None)
        assert source is not None, f"{path}: a 'Source: ...' line under the title"
        assert len(source) > 30, f"{path}: the source line names a paper, book or page"
        assert 800 < len("\n".join(lines)) < 4000, f"{path}: a short document"


@pytest.mark.parametrize("name", BUNDLED)
def test_docs_describe_methods_not_the_best_known_solution(name: str) -> None:
    meta = yaml.safe_load((TASKS / name / "task.yaml").read_text(encoding="utf-8"))
    sota = f"{float(meta['sota_score']):.6f}".rstrip("0").rstrip(".")
    for path in _docs(name):
        text = path.read_text(encoding="utf-8")
        if "." in sota:  # an integer optimum (LABS energy 37) is too short to look for
            assert sota not in text, f"{path} quotes the best-known value {sota}"
        assert not NUMBER_LIST.search(text), f"{path} lists solution values"


@pytest.mark.parametrize(
    ("name", "query", "expected"),
    [
        ("lennard_jones_13", "basin hopping global optimisation of a cluster", "basin_hopping"),
        ("circle_packing_26", "SLSQP constraints for circles in a square", "slsqp_formulation"),
        ("labs_27", "tabu search memetic algorithm binary sequence", "memetic_tabu_search"),
        ("pressure_vessel", "active volume constraint thickness grid", "decomposition"),
        ("lennard_jones_10", "many random starts L-BFGS-B analytic gradient", "multistart_lbfgs"),
        ("circle_packing_10", "linear program radii for fixed centres layouts", "layouts_and"),
        ("heilbronn_triangle_7", "simulated annealing barycentric moves", "local_search"),
        ("tsp_folder", "2-opt segment reversal Or-opt tour improvement", "local_search"),
    ],
)
def test_offline_backend_finds_the_task_documents(
    tmp_path: Path, name: str, query: str, expected: str
) -> None:
    cfg = RetrievalConfig(
        backend="offline", offline_include_pydoc=[], index_cache_dir=str(tmp_path / "cache")
    )
    searcher = make_searcher(cfg, task_dir=TASKS / name)
    searcher.preflight()
    hits = searcher.search(query, 3)
    assert hits and hits[0].url.startswith(f"file:docs/{expected}"), [h.url for h in hits]
    assert hits[0].title.startswith(f"docs/{expected}")  # the document's own title line
