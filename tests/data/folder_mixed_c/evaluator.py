"""Test task mixing C and Python in one folder program.

``evaluate(program_path)`` gets the candidate folder: it compiles ``kernel.c`` with gcc (or
cc), runs it, passes the number it prints to ``combine(weight)`` of ``combine.py`` and scores
``value`` = that result, capped at 10 (``combined_score`` = value / 10). ``table.bin`` (a
binary file carried with the folder, never shown to the model) must be there unchanged.
"""

import importlib.util
import os
import shutil
import subprocess
import tempfile


def _fail(reason, stderr=""):
    return {"combined_score": 0.0, "error": reason, "stderr": stderr[-2000:]}


def evaluate(program_path):
    folder = os.path.abspath(program_path)
    if not os.path.isdir(folder):
        return _fail(f"expected a folder, got {program_path}")
    with open(os.path.join(folder, "table.bin"), "rb") as fh:
        if fh.read() != b"BIN\x00\x01\x02\xff":
            return _fail("table.bin is missing or changed")
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return _fail("no C compiler")
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "kernel")
        build = subprocess.run(
            [compiler, "-std=c99", "-O1", "-o", binary, os.path.join(folder, "kernel.c")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if build.returncode != 0:
            return _fail("kernel.c does not compile", build.stderr)
        run = subprocess.run([binary], capture_output=True, text=True, timeout=10)
        if run.returncode != 0:
            return _fail(f"kernel exited with {run.returncode}", run.stderr)
    weight = float(run.stdout.split()[0])
    spec = importlib.util.spec_from_file_location("combine", os.path.join(folder, "combine.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    value = min(10.0, float(module.combine(weight)))
    return {"value": value, "weight": weight, "combined_score": value / 10.0}
