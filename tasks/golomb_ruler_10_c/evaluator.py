"""Evaluator of the Golomb ruler task with 10 marks; the program is written in C.

``evaluate(program_path)`` compiles the candidate with the system C compiler
(``cc -std=c99 -O2 -o ruler program.c -lm``) in a temporary folder, runs the binary (10 s
limit), and checks what it prints itself. The output is valid when it holds exactly 10
integers (whitespace-separated) that are distinct and non-negative, and every pair of marks is
a different distance apart (a Golomb ruler). The marks are sorted and shifted so the first is 0.

Metrics of a valid ruler: ``length`` (last mark minus first; lower is better), ``validity`` =
1.0 and ``combined_score`` = 55 / length (higher is better; 1.0 at the optimum: the optimal
Golomb ruler with 10 marks has length 55). A program that does not compile, crashes, times out
or prints an invalid ruler scores ``combined_score`` = 0.0 with an ``error`` naming the problem
(the compiler's or program's stderr is in ``stderr``).
"""

import os
import shutil
import subprocess
import tempfile

MARKS = 10
BEST_LENGTH = 55  # optimal Golomb ruler with 10 marks
COMPILE_TIMEOUT_S = 60
RUN_TIMEOUT_S = 10


def _fail(reason, stderr=""):
    result = {"combined_score": 0.0, "validity": 0.0, "error": reason}
    if stderr:
        result["stderr"] = stderr[-4000:]
    return result


def _compiler():
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    return None


def check_ruler(marks):
    """Return (length, None) for a valid Golomb ruler of MARKS marks, else (None, reason)."""
    if len(marks) != MARKS:
        return None, f"expected {MARKS} marks, got {len(marks)}"
    if any(m < 0 for m in marks):
        return None, "marks must be non-negative"
    marks = sorted(marks)
    if len(set(marks)) != MARKS:
        return None, "marks must be distinct"
    seen = {}
    for i in range(MARKS):
        for j in range(i + 1, MARKS):
            d = marks[j] - marks[i]
            if d in seen:
                a, b = seen[d]
                return None, f"distance {d} occurs twice: {a}-{b} and {marks[i]}-{marks[j]}"
            seen[d] = (marks[i], marks[j])
    return marks[-1] - marks[0], None


def evaluate(program_path):
    compiler = _compiler()
    if compiler is None:
        return _fail("no C compiler found (cc, gcc or clang)")
    with tempfile.TemporaryDirectory(prefix="golomb_") as tmp:
        source = os.path.join(tmp, "ruler.c")
        binary = os.path.join(tmp, "ruler")
        shutil.copyfile(program_path, source)
        try:
            build = subprocess.run(
                [compiler, "-std=c99", "-O2", "-o", binary, source, "-lm"],
                capture_output=True,
                text=True,
                timeout=COMPILE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return _fail(f"compilation took longer than {COMPILE_TIMEOUT_S} s")
        if build.returncode != 0:
            return _fail("compilation failed", build.stderr)
        try:
            run = subprocess.run(
                [binary], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp
            )
        except subprocess.TimeoutExpired:
            return _fail(f"the program ran longer than {RUN_TIMEOUT_S} s")
        if run.returncode != 0:
            return _fail(f"the program exited with code {run.returncode}", run.stderr)
    try:
        marks = [int(tok) for tok in run.stdout.split()]
    except ValueError:
        return _fail(f"the output is not whitespace-separated integers: {run.stdout[:200]!r}")
    length, problem = check_ruler(marks)
    if problem is not None:
        return _fail(f"not a Golomb ruler: {problem}")
    return {
        "length": float(length),
        "validity": 1.0,
        "combined_score": BEST_LENGTH / length,
        "marks": " ".join(str(m - min(marks)) for m in sorted(marks)),
    }
