"""Task folders users already have: any language, SkyDiscover layouts, the task config's settings.

Every folder here is built in the test (OpenEvolve / SkyDiscover shapes) and run through the
real sandbox and graph with a scripted model.
"""

from __future__ import annotations

import json
import os
import stat
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from evoduet_graph import EvoDuetConfig, run
from evoduet_graph.evaluation import SandboxEvaluator
from evoduet_graph.llm import make_chat_model
from evoduet_graph.llm.ensemble import EnsembleChatModel, WeightedChoice
from evoduet_graph.rundir.store import ProgramStore
from evoduet_graph.task import TaskError, load_task
from evoduet_graph.tasks.environment import check_toolchain, requirements_warning
from evoduet_graph.tasks.languages import ToolchainError, language_by_name
from evoduet_graph.tasks.settings import apply_task_settings
from tests.fakes import ScriptedChatModel

# An evaluator for programs in any language: it reads `value = N` from the file (no compiler
# needed) and refuses a candidate file that does not have the expected suffix.
SUFFIX_EVALUATOR = """\
import re

SUFFIX = {suffix!r}

def evaluate(program_path):
    if not program_path.endswith(SUFFIX):
        return {{"combined_score": 0.0, "error": "wrong suffix: " + program_path}}
    text = open(program_path, encoding="utf-8").read()
    match = re.search(r"value\\s*(?:=|<-)\\s*([0-9.]+)", text)
    if match is None:
        return {{"combined_score": 0.0, "error": "no value in the program"}}
    return {{"combined_score": float(match.group(1)), "suffix_ok": 1.0}}
"""

C_PROGRAM = """\
#include <stdio.h>

// EVOLVE-BLOCK-START
static double value = 1.0;
// EVOLVE-BLOCK-END

int main(void) {
    printf("%f\\n", value);
    return 0;
}
"""


def _folder(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / name
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def _cfg(iterations: int = 2, **extra: object) -> EvoDuetConfig:
    data = {
        "iterations": iterations,
        "population": {"num_islands": 1},
        "novelty": {"enabled": False},
        "gate": {"mode": "never"},  # the layouts are under test, not the gate
        **extra,
    }
    return EvoDuetConfig.model_validate(data)


def _programs(run_dir: Path) -> list[tuple[str, str | None, str, bool, str | None]]:
    store = ProgramStore(run_dir / "programs.sqlite")
    try:
        rows = store.all_programs()
        return [(r.id, r.code, r.status, r.valid, r.error) for r in rows]
    finally:
        store.close()


# ------------------------------------------------------------------------ any language


def test_c_task_with_slash_markers_runs_two_iterations_and_evaluator_sees_c_files(
    tmp_path: Path,
) -> None:
    folder = _folder(
        tmp_path,
        "c_task",
        {
            "initial_program.c": C_PROGRAM,
            "evaluator.py": SUFFIX_EVALUATOR.format(suffix=".c"),
            "config.yaml": "language: c\nprompt:\n  system_message: Make value larger.\n",
        },
    )
    task = load_task(folder)
    assert (task.language, task.file_suffix, task.program_file) == ("c", ".c", "initial_program.c")
    assert task.has_evolve_blocks
    # iteration 1: a SEARCH/REPLACE diff; iteration 2: a full rewrite in a ```c block
    diff = (
        "<<<<<<< SEARCH\nstatic double value = 1.0;\n=======\nstatic double value = 2.0;\n"
        ">>>>>>> REPLACE\n"
    )
    rewrite = "```c\n" + C_PROGRAM.replace("1.0", "3.5") + "```\n"
    llm = ScriptedChatModel(responses=[diff, rewrite])
    result = run(folder, _cfg(), llm=llm, run_dir=tmp_path / "run")
    assert result.iterations == 2 and result.stop_reason is None
    assert result.best_score == 3.5
    assert "static double value = 3.5;" in result.best_program
    assert "int main(void)" in result.best_program  # fixed code kept
    assert (tmp_path / "run" / "best_program.c").is_file()
    rows = [r for r in _programs(tmp_path / "run") if r[0] != "initial"]
    assert len(rows) == 2 and all(r[3] for r in rows), rows  # the evaluator saw .c files
    system, user = llm.prompts[0]  # the run's system message, then context and mutation job
    assert "improves a C program" in system.content
    assert "```c\n" in user.content
    assert "`// EVOLVE-BLOCK-START`" in user.content


def test_whole_file_task_without_markers_lets_the_model_rewrite_everything(
    tmp_path: Path,
) -> None:
    """An R-like folder: language from the suffix, no markers, the whole file may change."""
    folder = _folder(
        tmp_path,
        "r_task",
        {
            "initial_program.r": "value <- 1\nprint(value)\n",
            "evaluator.py": SUFFIX_EVALUATOR.format(suffix=".r"),
        },
    )
    task = load_task(folder)
    assert (task.language, task.file_suffix, task.has_evolve_blocks) == ("r", ".r", False)
    new = "```r\n# a new approach\nvalue <- 4\ncat(value, '\\n')\n```\n"
    llm = ScriptedChatModel(responses=[], default=new)
    cfg = _cfg(iterations=1, prompt={"diff_based": False})
    result = run(folder, cfg, llm=llm, run_dir=tmp_path / "run")
    assert result.best_score == 4.0
    assert result.best_program.startswith("# a new approach\nvalue <- 4")
    user = llm.prompts[0][-1].content
    assert "```r\nvalue <- 1" in user
    assert "single ```r code block (R)" in user
    assert "EVOLVE-BLOCK-START`" not in user  # no edit-scope rule without markers


def test_program_option_picks_the_file_and_a_folder_without_markers_is_refused(
    tmp_path: Path,
) -> None:
    folder = _folder(
        tmp_path,
        "multi",
        {
            "evaluator.py": SUFFIX_EVALUATOR.format(suffix=".rs"),
            "src/solver.rs": "fn main() { let value = 2; }\n",
            "initial_program/main.cpp": "int main() {}\n",
        },
    )
    with pytest.raises(TaskError, match="no file of the folder program initial_program/ has "):
        load_task(folder)
    task = load_task(folder, program=folder / "src" / "solver.rs")
    assert (task.language, task.file_suffix, task.program_file) == ("rust", ".rs", "src/solver.rs")
    with pytest.raises(TaskError, match="no such file"):
        load_task(folder, program="missing.rs")


def test_python_only_steps_fall_back_for_other_languages() -> None:
    from evoduet_graph.candidates.diffs import candidate_from_response
    from evoduet_graph.candidates.novelty import normalise

    parent = "#include <stdio.h>\n// EVOLVE-BLOCK-START\nint v = 1;\n// EVOLVE-BLOCK-END\n"
    answer = (
        "```c\n#include <math.h>\n#include <stdio.h>\n// EVOLVE-BLOCK-START\nint v = 2;\n"
        "// EVOLVE-BLOCK-END\n```"
    )
    c = candidate_from_response(
        parent, answer, diff_based=False, restrict_to_evolve_blocks=True, language="c"
    )
    # no Python import hoisting: the region gets only what the model wrote inside it
    assert c.code == "#include <stdio.h>\n// EVOLVE-BLOCK-START\nint v = 2;\n// EVOLVE-BLOCK-END\n"
    # a ```python block is not a C program
    assert (
        candidate_from_response(
            parent,
            "```python\nint v = 3;\n```",
            diff_based=False,
            restrict_to_evolve_blocks=True,
            language="c",
        ).code
        is None
    )
    # a cut-off C block is rejected (no compile check outside Python)
    cut = candidate_from_response(
        "int v = 1;\n",
        "```c\nint v = 2;\n",
        diff_based=False,
        restrict_to_evolve_blocks=False,
        language="c",
    )
    assert cut.code is None and "not closed" in (cut.error or "")
    # novelty: '#' is not a comment in C, so it must not be dropped
    a, b = normalise("#define N 3\nint x;", python=False), normalise("int x;", python=False)
    assert not a.tokenized and a.sha != b.sha


def test_languages_table() -> None:
    assert language_by_name("Python").is_python
    rust = language_by_name("rust")
    assert (rust.suffix, rust.fence) == (".rs", "rust") and "rs" in rust.fence_tags
    odd = language_by_name("zig")
    assert (odd.suffix, odd.fence, odd.is_python) == (".zig", "zig", False)


# ------------------------------------------------------------------------ SkyDiscover layouts

SKY_EVALUATOR = """\
from helper import score  # a module beside evaluator.py in evaluator/

def evaluate(program_path):
    return {"combined_score": score(program_path), "eval_time": 0.01}

if __name__ == "__main__":
    from wrapper import run
    run(evaluate)
"""

SKY_HELPER = """\
import importlib.util

def score(path):
    spec = importlib.util.spec_from_file_location("prog", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return float(mod.value())
"""

PY_PROGRAM = "# EVOLVE-BLOCK-START\ndef value():\n    return 2.0\n# EVOLVE-BLOCK-END\n"


def test_skydiscover_evaluator_dir_with_python_evaluator(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "sky_py",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator/evaluator.py": SKY_EVALUATOR,
            "evaluator/helper.py": SKY_HELPER,
            "evaluator/evaluate.sh": 'python /benchmark/evaluator.py "$1"\n',
            "evaluator/Dockerfile": "FROM python:3.12-slim\nWORKDIR /benchmark\n",
            "config.yaml": """\
                language: python
                diff_based_generation: true
                max_solution_length: 60000
                monitor: {enabled: true, port: 8765}
                human_feedback_enabled: true
                prompt:
                  system_message: Make value() larger.
                evaluator:
                  timeout: 30
                  cascade_evaluation: true
                  cascade_thresholds: [0.3, 0.6]
                """,
        },
    )
    task = load_task(folder)
    assert (task.layout, task.evaluator_kind) == ("skydiscover", "python")
    assert task.evaluator_path == folder / "evaluator" / "evaluator.py"
    assert task.timeout_s == 30.0 and task.instruction == "Make value() larger."
    assert not any("monitor" in w or "human_feedback" in w for w in task.warnings), task.warnings
    diff = "<<<<<<< SEARCH\n    return 2.0\n=======\n    return 5.0\n>>>>>>> REPLACE\n"
    result = run(
        folder, _cfg(), llm=ScriptedChatModel(responses=[], default=diff), run_dir=tmp_path / "run"
    )
    assert result.best_score == 5.0


EVALUATE_SH = """\
#!/usr/bin/env bash
set -euo pipefail
PROGRAM="$1"
v=$(sed -n 's/^value = //p' "$PROGRAM")
extra=$(cat data/offset.txt)   # relative: the evaluator/ folder is the working directory
if [ -z "$v" ]; then
  echo '{"status": "error", "combined_score": 0.0, "metrics": {}, "artifacts": {"error": "no value line"}}'
  exit 0
fi
echo "progress line that is not JSON"
echo "{\\"status\\": \\"success\\", \\"combined_score\\": $((v + extra)), \\"metrics\\": {\\"value\\": $v}, \\"artifacts\\": {\\"cwd\\": \\"$(pwd)\\"}}"
"""  # noqa: E501 - evaluate.sh lines kept whole: JSON one line per echo


def test_skydiscover_evaluate_sh_only_folder_runs_the_script_and_reads_its_json(
    tmp_path: Path,
) -> None:
    folder = _folder(
        tmp_path,
        "sky_sh",
        {
            "initial_program.txt": "value = 3\n",
            "evaluator/evaluate.sh": EVALUATE_SH,
            "evaluator/data/offset.txt": "10\n",
        },
    )
    script = folder / "evaluator" / "evaluate.sh"
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    task = load_task(folder)
    assert (task.layout, task.evaluator_kind, task.language) == ("skydiscover", "shell", "text")
    ev = SandboxEvaluator(task, timeout_s=30)
    ok = ev.evaluate("value = 5\n")
    assert ok.valid, ok.error
    assert ok.score == 15.0 and ok.metrics == {"value": 5.0, "combined_score": 15.0}
    assert ok.artifacts["cwd"].endswith("/evaluator")
    bad = ev.evaluate("nothing here\n")
    assert not bad.valid and "status 'error'" in (bad.error or "") and "no value line" in bad.error
    # a run: the model rewrites the whole text file (no markers)
    llm = ScriptedChatModel(responses=[], default="```text\nvalue = 7\n```\n")
    result = run(
        folder, _cfg(iterations=1, prompt={"diff_based": False}), llm=llm, run_dir=tmp_path / "run"
    )
    assert result.best_score == 17.0


def test_evaluate_sh_without_json_is_an_invalid_candidate_with_the_reason(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "sky_bad",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator/evaluate.sh": "echo not json\necho oops >&2\nexit 3\n",
        },
    )
    outcome = SandboxEvaluator(load_task(folder), timeout_s=30).evaluate(PY_PROGRAM)
    assert not outcome.valid
    assert "evaluate.sh exited with code 3: oops" in (outcome.error or "")


def test_container_only_script_paths_are_reported(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "sky_container",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator/evaluate.sh": 'python /benchmark/evaluator.py "$1"\n',
            "evaluator/Dockerfile": "FROM python:3.12-slim\nWORKDIR /benchmark\n",
        },
    )
    task = load_task(folder)
    assert any("/benchmark/" in w and "evaluation.container" in w for w in task.warnings)


def test_folder_without_initial_program_asks_the_model_for_the_first_one(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "scratch",
        {
            "evaluator/evaluator.py": SKY_EVALUATOR.replace(
                "from helper import score", "from helper import score  # noqa"
            ),
            "evaluator/helper.py": SKY_HELPER,
            "config.yaml": "prompt:\n  system_message: Write value() returning a large number.\n",
        },
    )
    task = load_task(folder)
    assert not task.has_initial_program and task.program_file is None
    assert any("no initial program" in w for w in task.warnings)
    first = "```python\ndef value():\n    return 6.0\n```\n"
    better = "```python\ndef value():\n    return 8.0\n```\n"
    llm = ScriptedChatModel(responses=[first, better])
    result = run(folder, _cfg(), llm=llm, run_dir=tmp_path / "run")
    assert result.best_score == 8.0
    assert "There is no program yet" in llm.prompts[0][1].content
    assert "return 6.0" in llm.prompts[1][-1].content  # the second iteration improves the first
    run_meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "program" not in run_meta


# ------------------------------------------------------------------------ task config settings


def test_max_solution_length_makes_longer_candidates_invalid(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "short",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator/evaluator.py": SKY_EVALUATOR,
            "evaluator/helper.py": SKY_HELPER,
            "config.yaml": "max_solution_length: 120\n",
        },
    )
    task = load_task(folder)
    settings = apply_task_settings(task, _cfg(iterations=1))
    assert settings.config.max_code_length == 120
    assert any("max_solution_length=120" in line for line in settings.lines())
    long_body = "    x = 0\n" + "    x += 1\n" * 20 + "    return 9.0 + x * 0\n"
    diff = f"<<<<<<< SEARCH\n    return 2.0\n=======\n{long_body}>>>>>>> REPLACE\n"
    result = run(
        folder,
        _cfg(iterations=1),
        llm=ScriptedChatModel(responses=[], default=diff),
        run_dir=tmp_path / "run",
    )
    assert result.best_score == 2.0
    child = next(r for r in _programs(tmp_path / "run") if r[0] != "initial")
    assert child[2] == "invalid" and "over the limit of 120" in (child[4] or "")
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").open()]
    reported = next(e for e in events if e["event"] == "task_settings")
    assert reported["layout"] == "skydiscover" and "max_solution_length=120" in reported["used"]


def test_task_settings_used_and_ignored_lines() -> None:
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "circle_packing_26")
    settings = apply_task_settings(task, EvoDuetConfig())
    text = "\n".join(settings.lines())
    assert "evaluator.timeout=60 s" in text and "max_code_length=20000" in text
    assert "diff_based_evolution=true not used with the embedded model" in text
    assert "model settings (gpt-4o-mini (weight 1)) ignored" in text and "--model task" in text
    assert settings.config.max_code_length == 20000 and settings.config.prompt.diff_based is None
    hosted = apply_task_settings(task, EvoDuetConfig().with_overrides({"llm.model": "openai:x"}))
    assert hosted.config.prompt.diff_based is True
    again = apply_task_settings(task, hosted.config)  # idempotent: resume and CLI re-apply it
    assert again.config == hosted.config and again.lines() == hosted.lines()
    mine = apply_task_settings(
        task, EvoDuetConfig().with_overrides({"seed": 3, "max_code_length": 9})
    )
    assert any("random_seed=42 ignored: seed=3 is set" in line for line in mine.lines())
    assert mine.config.seed == 3 and mine.config.max_code_length == 9


def test_model_task_builds_the_weighted_ensemble_of_the_task_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(
        tmp_path,
        "oe_models",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator/evaluator.py": SKY_EVALUATOR,
            "evaluator/helper.py": SKY_HELPER,
            "config.yaml": """\
                random_seed: 5
                llm:
                  primary_model: "flash-lite"
                  primary_model_weight: 0.8
                  secondary_model: "flash"
                  secondary_model_weight: 0.2
                  api_base: "http://127.0.0.1:9/v1"
                  temperature: 0.8
                  max_tokens: 4096
                """,
        },
    )
    task = load_task(folder)
    cfg = apply_task_settings(task, EvoDuetConfig().with_overrides({"llm.model": "task"})).config
    assert cfg.seed == 5
    assert [
        (m.model, m.weight, m.base_url, m.temperature, m.max_tokens) for m in cfg.llm.models
    ] == [
        ("openai:flash-lite", 0.8, "http://127.0.0.1:9/v1", 0.8, 4096),
        ("openai:flash", 0.2, "http://127.0.0.1:9/v1", 0.8, 4096),
    ]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = make_chat_model(cfg.llm, seed=cfg.seed)  # builds, sends nothing
    assert isinstance(model, EnsembleChatModel) and model.names == [
        "openai:flash-lite",
        "openai:flash",
    ]
    with pytest.raises(Exception, match="names none"):
        apply_task_settings(
            load_task(
                _folder(
                    tmp_path,
                    "plain",
                    {"initial_program.py": PY_PROGRAM, "evaluator/evaluator.py": SKY_EVALUATOR},
                )
            ),
            EvoDuetConfig().with_overrides({"llm.model": "task"}),
        )


def test_ensemble_picks_members_by_weight_over_200_seeded_draws() -> None:
    big = ScriptedChatModel(responses=[], default="big")
    small = ScriptedChatModel(responses=[], default="small")
    ensemble = EnsembleChatModel.from_members([("big", big, 0.8), ("small", small, 0.2)], seed=11)
    answers = Counter(ensemble.invoke("hi").content for _ in range(200))
    assert answers["big"] + answers["small"] == 200
    assert 140 <= answers["big"] <= 180, answers  # expected 160, sd ~5.7
    assert (big.calls, small.calls) == (answers["big"], answers["small"])
    # seeded: the same seed gives the same sequence, another seed another one
    seq = [WeightedChoice([0.8, 0.2], seed=3).pick() for _ in range(1)]
    a = WeightedChoice([0.8, 0.2], seed=3)
    b = WeightedChoice([0.8, 0.2], seed=3)
    c = WeightedChoice([0.8, 0.2], seed=4)
    draws_a = [a.pick() for _ in range(200)]
    assert draws_a == [b.pick() for _ in range(200)] and seq[0] == draws_a[0]
    assert draws_a != [c.pick() for _ in range(200)]
    assert 0.7 <= draws_a.count(0) / 200 <= 0.9
    with pytest.raises(ValueError, match="positive"):
        WeightedChoice([1.0, 0.0], seed=0)


# ------------------------------------------------------------------------ environment checks


def test_missing_toolchain_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(
        tmp_path,
        "r_tool",
        {
            "initial_program.r": "value <- 1\n",
            "evaluator.py": (
                'import subprocess\n\ndef evaluate(p):\n    subprocess.run(["Rscript", p])\n'
                '    return {"score": 1.0}\n'
            ),
        },
    )
    task = load_task(folder)
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ToolchainError) as info:
        check_toolchain(task)
    message = str(info.value)
    assert "\n" not in message and "`Rscript`" in message and "r-base-core" in message
    with pytest.raises(TaskError, match="Rscript"):  # a run refuses it before any work
        run(folder, _cfg(iterations=1), llm=ScriptedChatModel(responses=[]), run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_unmet_requirements_are_named_in_one_warning(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        "reqs",
        {
            "initial_program.py": PY_PROGRAM,
            "evaluator.py": SKY_EVALUATOR,
            "requirements.txt": "# comment\nnumpy\n--index-url https://example.invalid\nno-such-package-xyz>=1\n",
            "evaluator/requirements.txt": "pydantic>=999\nsomething ; python_version < '3'\n",
        },
    )
    message = requirements_warning(load_task(folder))
    assert message is not None and "\n" not in message
    assert "no-such-package-xyz>=1 (not installed)" in message
    assert "pydantic>=999 (installed " in message
    assert "numpy" not in message.split("satisfied")[1].split(";")[0]
    assert "Nothing is installed automatically" in message


def test_bundled_c_task_compiles_and_scores_with_cc() -> None:
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "golomb_ruler_10_c")
    assert (task.language, task.file_suffix, task.direction, task.metric) == (
        "c",
        ".c",
        "min",
        "length",
    )
    outcome = SandboxEvaluator(task, timeout_s=60).evaluate(
        task.initial_program.replace(
            "build_ruler(marks);",
            "build_ruler(marks);\n    { int best[MARKS] = {0, 1, 6, 10, 23, 26, 34, 41, 53, 55};"
            " memcpy(marks, best, sizeof best); }",
        )
    )
    assert outcome.valid, outcome.error
    assert outcome.metrics["length"] == 55.0 and outcome.score == 1.0
    assert task.ndg(55.0) == 100.0
    broken = SandboxEvaluator(task, timeout_s=60).evaluate("int main(void) { return x; }\n")
    assert not broken.valid and "compilation failed" in (broken.error or "")
    assert os.path.isdir(task.path / "docs")


# ------------------------------------------------------------------------ command line


def test_cli_eval_of_skydiscover_script_folder_and_folder_without_program(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evoduet_graph.cli import app

    folder = _folder(
        tmp_path,
        "sky_cli",
        {"evaluator/evaluate.sh": EVALUATE_SH, "evaluator/data/offset.txt": "1\n"},
    )
    program = tmp_path / "mine.txt"
    program.write_text("value = 4\n")
    runner = CliRunner()
    ok = runner.invoke(app, ["eval", str(folder), str(program)])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout.strip().splitlines()[-1])["score"] == 5.0
    missing = runner.invoke(app, ["eval", str(folder)])
    assert missing.exit_code == 2
    assert "has no initial program to evaluate" in " ".join(missing.output.split())


def test_cli_run_program_option_is_kept_for_resume(tmp_path: Path) -> None:
    from evoduet_graph.api import program_entry

    folder = _folder(
        tmp_path,
        "two_files",
        {
            "evaluator.py": SUFFIX_EVALUATOR.format(suffix=".r"),
            "initial_program.r": "value <- 1\n",
            "alt/other.r": "value <- 2\n",
        },
    )
    task = load_task(folder, program=folder / "alt" / "other.r")
    assert program_entry(task) == {"program": str(folder / "alt" / "other.r")}
    llm = ScriptedChatModel(responses=[], default="```r\nvalue <- 6\n```\n")
    run(task, _cfg(iterations=1, prompt={"diff_based": False}), llm=llm, run_dir=tmp_path / "run")
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["program"] == str(folder / "alt" / "other.r")
    assert "value <- 2" in llm.prompts[0][-1].content  # the chosen file, not initial_program.r


TOOLCHAIN_EVALUATOR = """\
import os
import subprocess
import tempfile

def evaluate(program_path):
    if {compile!r}:
        binary = os.path.join(tempfile.mkdtemp(), "prog")
        subprocess.run([{tool!r}, "-O", "-o", binary, program_path], check=True,
                       capture_output=True)
        argv = [binary]
    else:
        argv = [{tool!r}, program_path]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {{"combined_score": float(out.split()[-1])}}
"""


@pytest.mark.parametrize(
    ("tool", "suffix", "program", "compile_"),
    [
        ("Rscript", ".r", "value <- 3\ncat(value, '\\n')\n", False),
        ("rustc", ".rs", 'fn main() {\n    let value = 3;\n    println!("{}", value);\n}\n', True),
    ],
)
def test_r_and_rust_programs_evaluate_where_installed_else_one_line_error(
    tmp_path: Path, tool: str, suffix: str, program: str, compile_: bool
) -> None:
    """Programs in R and Rust are evaluated, or the missing toolchain is named.

    With the toolchain installed (R: apt-get install r-base-core; Rust: rustc/cargo) the
    program is evaluated through the CLI; without it, `evoduet eval` names it in one line.
    """
    import shutil

    from typer.testing import CliRunner

    from evoduet_graph.cli import app

    folder = _folder(
        tmp_path,
        f"lang{suffix[1:]}",
        {
            f"initial_program{suffix}": program,
            "evaluator.py": TOOLCHAIN_EVALUATOR.format(tool=tool, compile=compile_),
        },
    )
    result = CliRunner().invoke(app, ["eval", str(folder)])
    if shutil.which(tool):
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout.strip().splitlines()[-1])["score"] == 3.0
    else:
        assert result.exit_code == 2
        error = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and f"`{tool}`" in error[0], result.output


FAKE_DOCKER = """\
#!/bin/bash
# A stand-in for the docker CLI: `info` answers, `build` remembers the context folder, `run`
# runs the image's evaluate.sh (its ENTRYPOINT) on the mounted candidate.
state="{state}"
echo "$*" >> "$state/calls.txt"
case "$1" in
  info) [ {info_rc} = 0 ] && exit 0 ;;
  build) echo "${{@: -1}}" > "$state/context.txt"; exit 0 ;;
  run)
    shift
    while [ "$1" != "--network" ]; do shift; done
    shift 2   # --network none
    mount="$2"; shift 2   # -v SRC:DST:ro
    src="${{mount%%:*}}"
    shift     # image
    cd "$(cat "$state/context.txt")" && exec bash evaluate.sh "$src" "$2" ;;
esac
echo "Cannot connect to the Docker daemon" >&2
exit 1
"""


@pytest.mark.parametrize("info_rc", [0, 1])
def test_container_mode_builds_the_image_and_runs_evaluate_sh_in_it_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, info_rc: int
) -> None:
    from evoduet_graph.config import ConfigError, EvaluationConfig
    from evoduet_graph.evaluation import make_evaluator

    folder = _folder(
        tmp_path,
        "sky_container_run",
        {
            "initial_program.txt": "value = 3\n",
            "evaluator/evaluate.sh": EVALUATE_SH,
            "evaluator/data/offset.txt": "100\n",
            "evaluator/Dockerfile": "FROM python:3.12-slim\nWORKDIR /benchmark\n",
        },
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text(FAKE_DOCKER.format(state=tmp_path, info_rc=info_rc))
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(
        "shutil.which",
        lambda name, *a, **k: (
            str(docker) if name == "docker" else (None if name == "podman" else _which(name))
        ),
    )
    # the fake docker logs its calls to a file outside the candidate's temp dir, which bwrap's
    # read-only filesystem would refuse: this test runs on the detection fallback
    cfg = EvaluationConfig.model_validate(
        {"container": True, "workers": 1, "isolate_filesystem": False}
    )
    if info_rc != 0:
        with pytest.raises(ConfigError, match="needs a usable Docker or Podman.*Cannot connect"):
            make_evaluator(load_task(folder), cfg)
        return
    evaluator = make_evaluator(load_task(folder), cfg)
    outcome = evaluator.evaluate("value = 5\n")
    assert outcome.valid, outcome.error
    assert outcome.score == 105.0
    calls = (tmp_path / "calls.txt").read_text()
    assert "build -t evoduet-sky_container_run-" in calls
    assert "run --rm --name evoduet-" in calls and "--network none" in calls


_REAL_WHICH = __import__("shutil").which


def _which(name: str) -> str | None:
    return _REAL_WHICH(name)


def test_cli_model_task_sends_each_call_to_a_task_model_by_weight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evoduet run --model task` uses the task config's two models.

    `evoduet run --model task`: the task config's two models (weights 0.75 / 0.25) on its
    api_base (a scripted OpenAI-compatible server); the requests name both models.
    """
    from typer.testing import CliRunner

    from evoduet_graph.cli import app
    from tests.fake_openai_server import FaultyServer

    def answer(body: dict[str, object]) -> str:
        return "```python\ndef value():\n    return 3.0\n```\n"

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with FaultyServer(["ok"], content=answer) as server:
        folder = _folder(
            tmp_path,
            "oe_ensemble",
            {
                "initial_program.py": PY_PROGRAM,
                "evaluator/evaluator.py": SKY_EVALUATOR,
                "evaluator/helper.py": SKY_HELPER,
                "config.yaml": f"""\
                    diff_based_evolution: false
                    llm:
                      api_base: "{server.base_url}"
                      models:
                        - {{name: "model-a", weight: 0.75}}
                        - {{name: "model-b", weight: 0.25, temperature: 0.1}}
                    """,
            },
        )
        result = CliRunner().invoke(
            app,
            [
                "run",
                str(folder),
                "--model",
                "task",
                "--iterations",
                "12",
                "--out",
                str(tmp_path / "run"),
                "--config",
                str(_write_config(tmp_path)),
            ],
        )
        assert result.exit_code == 0, result.output
        names = Counter(str(body.get("model")) for _, body in server.requests)
    assert set(names) == {"model-a", "model-b"}, names
    assert sum(names.values()) == 12 and names["model-a"] > names["model-b"]
    temps = {str(b["model"]): b.get("temperature") for _, b in server.requests}
    assert temps["model-b"] == 0.1
    stored = (tmp_path / "run" / "config.yaml").read_text()
    assert "openai:model-a" in stored and "weight: 0.75" in stored


def _write_config(root: Path) -> Path:
    path = root / "run.yaml"
    path.write_text(
        "population: {num_islands: 1}\nnovelty: {enabled: false}\ngate: {mode: never}\n"
    )
    return path


def test_the_openevolve_schema_is_shared_by_the_loader_and_the_bench():
    from evoduet_graph.bench.openevolve_method import unknown_config_keys
    from evoduet_graph.tasks.openevolve_config import unknown_keys

    cfg = {
        "max_iterations": 3,
        "diff_based_generation": True,  # SkyDiscover's
        "llm": {"models": [{"name": "m", "wieght": 1}], "temperature": 0.2},
        "evolution_trace": {"include_failures": True, "colour": "red"},
        "typo_key": 1,
        "early_stopping_whatever": 2,
    }
    assert set(unknown_keys(cfg)) == {"typo_key", "evolution_trace.colour", "llm.models[0].wieght"}
    assert "diff_based_generation" in unknown_config_keys(cfg)
