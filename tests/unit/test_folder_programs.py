"""Folder programs: the bundle, per-file edits, loading, sandbox, prompt and best-program folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoduet_graph import load_task
from evoduet_graph.candidates.bundle import (
    BundleError,
    bundle_diff_summary,
    changed_files,
    check_path,
    materialise,
    pack,
    read_folder,
    unpack,
)
from evoduet_graph.candidates.folder_edits import (
    FolderPolicy,
    folder_candidate,
    python_compile_errors,
)
from evoduet_graph.task import TaskError
from tests.conftest import ROOT

TSP = ROOT / "tasks" / "tsp_folder"
MIXED = ROOT / "tests" / "data" / "folder_mixed_c"

A = "# EVOLVE-BLOCK-START\nSTEP = 1\n# EVOLVE-BLOCK-END\n"
B = "import a\n\n# EVOLVE-BLOCK-START\ndef f():\n    return a.STEP\n# EVOLVE-BLOCK-END\n"
FIXED = "def helper():\n    return 0\n"
PARENT = pack({"a.py": A, "pkg/b.py": B, "fixed.py": FIXED})
MARKED = FolderPolicy()
MARKERS = "evolvable inside its EVOLVE-BLOCK markers"


def edit(path: str, search: str, replace: str) -> str:
    return f"### File: {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


# ---------------------------------------------------------------- the bundle


def test_pack_and_unpack_round_trip_in_order() -> None:
    files = unpack(PARENT)
    assert list(files) == ["a.py", "pkg/b.py", "fixed.py"]
    assert files["pkg/b.py"] == B
    assert pack(files) == PARENT
    assert unpack(pack({"x.txt": "no newline"}))["x.txt"] == "no newline\n"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../evil.py", "outside the program folder"),
        ("a/../../evil.py", "outside the program folder"),
        ("/etc/passwd", "absolute path"),
        ("C:/x.py", "absolute path"),
        ("a\\b.py", "backslash"),
        ("", "empty"),
        (".", "the folder itself"),
    ],
)
def test_paths_outside_the_folder_are_refused(path: str, reason: str) -> None:
    problem = check_path(path)
    assert problem is not None and reason in problem
    with pytest.raises(BundleError, match=reason.split()[0]):
        pack({path: "x\n"})


def test_a_file_holding_a_header_line_is_refused_by_name() -> None:
    with pytest.raises(BundleError, match=r"^notes\.md: a line starts with"):
        pack({"notes.md": "### File: other.py\n"})


def test_read_folder_carries_binary_files_and_build_outputs(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print(1)\n")
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\xff")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\x00")
    (tmp_path / "kernel.o").write_text("not really an object file")
    (tmp_path / ".hidden").write_text("skipped")
    contents = read_folder(tmp_path)
    assert list(contents.files) == ["src/main.py"]
    assert sorted(contents.carried) == ["__pycache__/main.cpython-311.pyc", "data.bin", "kernel.o"]


def test_materialise_writes_text_files_over_carried_ones(tmp_path: Path) -> None:
    source = tmp_path / "initial"
    source.mkdir()
    (source / "data.bin").write_bytes(b"\x00\x01")
    target = materialise(PARENT, tmp_path / "out", carried_from=source, carried=["data.bin"])
    assert (target / "pkg" / "b.py").read_text() == B
    assert (target / "data.bin").read_bytes() == b"\x00\x01"
    with pytest.raises(BundleError, match="outside the program folder"):
        materialise("### File: ../x.py\nx\n", tmp_path / "bad")
    assert not (tmp_path / "x.py").exists()


def test_per_file_diff_names_each_file() -> None:
    child = pack({"a.py": A.replace("STEP = 1", "STEP = 2"), "pkg/b.py": B, "fixed.py": FIXED})
    assert changed_files(PARENT, child) == ["a.py"]
    diff = bundle_diff_summary(PARENT, child)
    assert diff.startswith("--- a/a.py\n+++ b/a.py\n@@")
    assert "-STEP = 1\n+STEP = 2" in diff and "pkg/b.py" not in diff
    assert bundle_diff_summary(PARENT, PARENT) == "(no change)"


# ---------------------------------------------------------------- per-file edits


def test_an_answer_editing_two_files_changes_both() -> None:
    answer = (
        "I change both.\n"
        + edit("a.py", "STEP = 1", "STEP = 3")
        + edit("pkg/b.py", "    return a.STEP", "    return 2 * a.STEP")
    )
    cand = folder_candidate(PARENT, answer, diff_based=True, policy=MARKED)
    assert cand.error is None and cand.kind == "diff"
    assert cand.changed == ["a.py", "pkg/b.py"]
    files = unpack(cand.code or "")
    assert "STEP = 3" in files["a.py"] and "2 * a.STEP" in files["pkg/b.py"]
    assert files["fixed.py"] == FIXED


@pytest.mark.parametrize("label", ["(evolvable)", f"({MARKERS})"])
def test_a_file_label_copied_from_the_prompt_is_read_as_the_path(label: str) -> None:
    answer = edit("a.py", "STEP = 1", "STEP = 4").replace(
        "### File: a.py", f"### File: `a.py` {label}"
    )
    cand = folder_candidate(PARENT, answer, diff_based=True, policy=MARKED)
    assert cand.error is None and cand.changed == ["a.py"]


@pytest.mark.parametrize("diff_based", [True, False])
def test_the_folder_format_example_edits_a_function_inside_the_markers(diff_based: bool) -> None:
    from evoduet_graph.prompts.folder import folder_output_format

    text = folder_output_format(diff_based=diff_based, new_files=False)
    example = text[text.index("Example of the form only") :]
    assert "### File: solver/moves.py" in example
    assert "return max(moves, key=lambda move: move.gain)" in example
    assert ("<<<<<<< SEARCH" in example) is diff_based
    assert ("# EVOLVE-BLOCK-START" in example) is not diff_based
    assert "$" not in text


def test_a_file_repeated_unchanged_is_skipped_and_the_other_edit_applies() -> None:
    repeated = f"### File: a.py\n```python\n{A}```\n"
    cand = folder_candidate(
        PARENT,
        repeated + edit("pkg/b.py", "    return a.STEP", "    return 3"),
        diff_based=False,
        policy=MARKED,
    )
    assert cand.error is None and cand.changed == ["pkg/b.py"]
    alone = folder_candidate(PARENT, repeated, diff_based=False, policy=MARKED)
    assert alone.code is None and alone.error == "the answer changed no file of the folder"


def test_a_per_file_rewrite_keeps_the_fixed_code() -> None:
    answer = (
        "### File: pkg/b.py\n```python\nimport a\n\n# EVOLVE-BLOCK-START\ndef f():\n"
        "    return 7\n# EVOLVE-BLOCK-END\n```\n"
    )
    cand = folder_candidate(PARENT, answer, diff_based=False, policy=MARKED)
    assert cand.error is None and cand.kind == "rewrite"
    assert unpack(cand.code or "")["pkg/b.py"].startswith("import a\n")


@pytest.mark.parametrize("path", ["../outside.py", "/tmp/outside.py", "pkg/../../outside.py"])
def test_an_answer_naming_a_path_outside_the_folder_is_invalid(path: str) -> None:
    answer = edit("a.py", "STEP = 1", "STEP = 3") + f"### File: {path}\n```python\nx = 1\n```\n"
    cand = folder_candidate(PARENT, answer, diff_based=True, policy=FolderPolicy(new_files=True))
    assert cand.code is None
    assert cand.error is not None and "outside the program folder" in cand.error


def test_read_only_files_and_new_files_follow_the_task() -> None:
    readonly = folder_candidate(
        PARENT, edit("fixed.py", "    return 0", "    return 1"), diff_based=True, policy=MARKED
    )
    assert readonly.code is None and readonly.error is not None
    assert readonly.error.startswith("fixed.py is read-only (it has no EVOLVE-BLOCK markers)")
    everything = folder_candidate(
        PARENT,
        edit("fixed.py", "    return 0", "    return 1"),
        diff_based=True,
        policy=FolderPolicy(evolve_all=True),
    )
    assert everything.error is None and everything.changed == ["fixed.py"]
    new = "### File: pkg/extra.py\n```python\nVALUE = 1\n```\n"
    refused = folder_candidate(PARENT, new, diff_based=True, policy=MARKED)
    assert refused.error is not None and "does not allow new files" in refused.error
    allowed = folder_candidate(PARENT, new, diff_based=True, policy=FolderPolicy(new_files=True))
    assert allowed.error is None and unpack(allowed.code or "")["pkg/extra.py"] == "VALUE = 1\n"


def test_failures_name_the_file() -> None:
    bad = folder_candidate(
        PARENT, edit("pkg/b.py", "    no such line", "    x = 1"), diff_based=True, policy=MARKED
    )
    assert bad.error is not None and bad.error.startswith("pkg/b.py: 1 of 1 diff block(s) failed")
    unnamed = folder_candidate(
        PARENT,
        "<<<<<<< SEARCH\nSTEP = 1\n=======\nSTEP = 2\n>>>>>>> REPLACE\n",
        diff_based=True,
        policy=MARKED,
    )
    assert unnamed.error is not None and "names no file" in unnamed.error
    broken = folder_candidate(
        PARENT,
        edit("pkg/b.py", "    return a.STEP", "    return (a.STEP"),
        diff_based=True,
        policy=MARKED,
    )
    assert broken.error is None
    problem = python_compile_errors(broken.code or "", broken.changed)
    assert problem is not None and problem.startswith("pkg/b.py does not compile: SyntaxError")


def test_an_unnamed_answer_goes_to_the_only_evolvable_file() -> None:
    parent = pack({"a.py": A, "fixed.py": FIXED})
    cand = folder_candidate(
        parent,
        "<<<<<<< SEARCH\nSTEP = 1\n=======\nSTEP = 2\n>>>>>>> REPLACE\n",
        diff_based=True,
        policy=MARKED,
    )
    assert cand.error is None and cand.changed == ["a.py"]


# ---------------------------------------------------------------- loading, evaluation, output


def test_the_bundled_folder_task_loads_as_a_folder() -> None:
    task = load_task(TSP)
    assert task.is_folder and task.program_file == "initial_program" and task.file_suffix == ""
    files = unpack(task.initial_program)
    assert sorted(files) == ["driver.py", "geometry.py", "heuristics.py"]
    assert MARKED.evolvable(files) == ["driver.py", "heuristics.py"]
    mixed = load_task(MIXED)
    assert (mixed.language, mixed.folder_carried) == ("c", ["table.bin"])


def test_a_folder_without_evolvable_files_or_with_a_bad_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "task"
    (folder / "initial_program").mkdir(parents=True)
    (folder / "evaluator.py").write_text("def evaluate(program_path):\n    return {}\n")
    (folder / "initial_program" / "main.py").write_text("x = 1\n")
    with pytest.raises(TaskError, match="no file of the folder program initial_program/ has"):
        load_task(folder)
    (folder / "task.yaml").write_text("folder:\n  evolve: all\n")
    assert load_task(folder).folder_evolve_all
    (folder / "initial_program" / "bad.py").write_text("def broken(:\n")
    with pytest.raises(TaskError, match="bad.py has a syntax error"):
        load_task(folder)
    (folder / "task.yaml").write_text("folder:\n  evolve: some\n")
    with pytest.raises(TaskError, match="folder.evolve"):
        load_task(folder)


def test_program_option_takes_a_folder(tmp_path: Path) -> None:
    other = tmp_path / "variant"
    other.mkdir()
    (other / "main.py").write_text(A)
    task = load_task(TSP, program=other)
    assert task.is_folder and task.program_dir == other.resolve()
    assert unpack(task.initial_program) == {"main.py": A}


def test_the_sandbox_evaluates_the_folder_with_its_carried_files() -> None:
    from evoduet_graph.evaluation.sandbox import SandboxEvaluator

    task = load_task(MIXED)
    sandbox = SandboxEvaluator(task, workers=1)
    initial = sandbox.evaluate(task.initial_program, "initial")
    assert initial.valid and initial.metrics["value"] == pytest.approx(1.0)
    files = unpack(task.initial_program)
    files["kernel.c"] = files["kernel.c"].replace("return 1.0;", "return 2.5;")
    files["combine.py"] = files["combine.py"].replace("SCALE = 1.0", "SCALE = 2.0")
    child = sandbox.evaluate(pack(files), "child")
    assert child.valid and child.metrics["value"] == pytest.approx(5.0)
    broken = sandbox.evaluate("### File: ../x.c\nint x;\n", "broken")
    assert not broken.valid and broken.error is not None
    assert "cannot be unpacked" in broken.error and "outside the program folder" in broken.error


def test_the_best_program_is_written_as_a_folder(tmp_path: Path) -> None:
    from evoduet_graph.rundir.best import write_best
    from evoduet_graph.rundir.store import ProgramRow, ProgramStore

    task = load_task(MIXED)
    store = ProgramStore(tmp_path / "programs.sqlite")
    files = unpack(task.initial_program)
    for i, scale in enumerate(("2.0", "3.0")):
        files["combine.py"] = files["combine.py"].replace("SCALE = 1.0", f"SCALE = {scale}")
        store.put_program(
            ProgramRow(
                id=f"p{i}",
                code=pack(files),
                parent_id=None,
                iteration=i,
                generation=0,
                kind="initial",
                status="evaluated",
                score=0.2,
                valid=True,
                metrics={},
            )
        )
        write_best(tmp_path, store, task, f"p{i}")
    best = tmp_path / "best_program"
    assert (best / "combine.py").read_text() == files["combine.py"]
    assert (best / "table.bin").read_bytes() == b"BIN\x00\x01\x02\xff"
    assert (
        json.loads((tmp_path / "best_program.json").read_text())["program_file"] == "best_program"
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_folder_prompt_shows_the_tree_and_outlines_what_does_not_fit() -> None:
    from evoduet_graph.prompts.folder import folder_program_text

    task = load_task(TSP)
    full = folder_program_text(task.initial_program, policy=MARKED, max_chars=20_000)
    tree = f"driver.py  ({MARKERS})\ngeometry.py  (read-only)\nheuristics.py  ({MARKERS})"
    assert tree in full
    assert full.index(f"### File: driver.py ({MARKERS})") < full.index(
        "### File: geometry.py (read-only)"
    )
    files = unpack(task.initial_program)
    tight = folder_program_text(
        task.initial_program,
        policy=MARKED,
        changed=["heuristics.py"],
        carried=["data/cities.bin"],
        max_chars=len(files["heuristics.py"]) + 10,
    )
    assert tight.index(f"### File: heuristics.py ({MARKERS})\n```python") < tight.index(
        f"### File: driver.py ({MARKERS}; outline only"
    )
    assert "data/cities.bin  (binary, not shown)" in tight
    assert "def distance_matrix(points):" in tight and "dist[i][j] = dist[j][i]" not in tight


def test_a_skydiscover_script_gets_the_candidate_folder(tmp_path: Path) -> None:
    from evoduet_graph.evaluation.sandbox import SandboxEvaluator

    folder = tmp_path / "script_task"
    (folder / "evaluator").mkdir(parents=True)
    (folder / "initial_program").mkdir()
    (folder / "initial_program" / "value.sh").write_text(
        "# EVOLVE-BLOCK-START\nVALUE=2\n# EVOLVE-BLOCK-END\n"
    )
    (folder / "evaluator" / "evaluate.sh").write_text(
        '[ -d "$1" ] || { echo "not a folder: $1" >&2; exit 3; }\n'
        '. "$1/value.sh"\n'
        'echo "{\\"status\\": \\"success\\", \\"combined_score\\": $VALUE, '
        '\\"metrics\\": {\\"value\\": $VALUE}}"\n'
    )
    task = load_task(folder)
    assert task.is_folder and task.evaluator_kind == "shell"
    sandbox = SandboxEvaluator(task, workers=1)
    assert sandbox.evaluate(task.initial_program).metrics["value"] == 2.0
    child = task.initial_program.replace("VALUE=2", "VALUE=5")
    assert sandbox.evaluate(child).metrics["combined_score"] == 5.0


def test_novelty_compares_the_evolvable_files_only() -> None:
    from evoduet_graph.nodes.generate import novelty_text

    task = load_task(TSP)
    text = novelty_text(task, task.initial_program)
    assert "### File: driver.py\n" in text and "### File: heuristics.py\n" in text
    assert "geometry.py" not in text and "def distance_matrix" not in text
    single = load_task(ROOT / "tasks" / "smoke_polygon_area")
    assert novelty_text(single, single.initial_program) == single.initial_program


def test_the_real_openevolve_refuses_a_folder_task(tmp_path: Path) -> None:
    from typing import Any, cast

    from evoduet_graph.bench.openevolve_method import OpenEvolveError, run_openevolve

    unused = cast(Any, None)
    with pytest.raises(OpenEvolveError, match="its program is a folder .*openevolve-mode"):
        run_openevolve(
            load_task(TSP),
            tmp_path,
            iterations=1,
            seed=0,
            endpoint=unused,
            env=unused,
            evaluator=unused,
            session=unused,
            sessions=unused,
        )
    assert not any(tmp_path.iterdir())
