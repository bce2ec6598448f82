"""Evaluator of the low-autocorrelation binary sequence (LABS) problem for length 27.

``evaluate(program_path)`` imports the candidate, calls ``run_sequence()`` and checks the
returned sequence itself. A sequence s is valid when it

- is a 1-D list, tuple or numpy array of exactly 27 numbers (not booleans, not a string);
- has every entry exactly +1 or -1 (1.0 and -1.0 are accepted; 0, 0.5, NaN or inf are not).

Its energy is computed exactly in integers:

    C_k = sum_{i=1}^{27-k} s_i s_{i+k}   (k = 1..26),    E = sum_{k=1}^{26} C_k^2.

E is at least 1 (C_26 = s_1 s_27 = +-1). The minimum for length 27 is E = 37, merit factor
27^2 / (2 * 37) = 9.851 (Packebusch & Mertens 2016, exhaustive search, arXiv:1512.02475).

Metrics of a valid sequence: ``energy`` (E, lower is better), ``merit_factor`` (27^2 / (2E)),
``validity`` = 1.0 and ``combined_score`` = 37 / E (higher is better; 1.0 at the optimum).
An invalid sequence scores ``combined_score`` = 0.0 with an ``error`` naming the problem.
Exceptions raised by the program itself propagate (the caller records the traceback).
"""

import importlib.util
import sys
import uuid

import numpy as np

N = 27
BEST_ENERGY = 37  # optimal energy for N = 27 (Packebusch & Mertens 2016)


def _load_program(program_path):
    name = f"labs_candidate_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def to_sequence(value):
    """Convert a returned value to an int64 array of shape (27,), or return an error string."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return (
            f"the sequence must be a list or numpy array of {N} numbers, got {type(value).__name__}"
        )
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return f"the sequence is not an array of real numbers: {exc}"
    if raw.dtype == bool:
        return "the sequence holds booleans; use the integers +1 and -1"
    if raw.dtype.kind not in "iuf":
        return f"the sequence is not an array of real numbers (dtype {raw.dtype})"
    seq = raw.astype(float)
    if seq.ndim != 1 or seq.shape[0] != N:
        return f"the sequence must have shape ({N},), got {seq.shape}"
    if not np.all(np.isfinite(seq)):
        return "the sequence contains NaN or inf"
    bad = np.where((seq != 1.0) & (seq != -1.0))[0]
    if bad.size:
        i = int(bad[0])
        return f"entry {i} is {float(seq[i])!r}; every entry must be +1 or -1"
    return seq.astype(np.int64)


def labs_energy(seq):
    """Energy sum_{k=1}^{n-1} C_k^2 of a +-1 int array (exact integer arithmetic)."""
    n = len(seq)
    return int(sum(int(np.dot(seq[: n - k], seq[k:])) ** 2 for k in range(1, n)))


def evaluate(program_path):
    """Validate the program's sequence and score it by its autocorrelation energy."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_sequence", None)):
        return _invalid("the program defines no run_sequence() function")
    seq = to_sequence(module.run_sequence())
    if isinstance(seq, str):
        return _invalid(seq)
    energy = labs_energy(seq)
    return {
        "energy": float(energy),
        "merit_factor": N * N / (2.0 * energy),
        "validity": 1.0,
        "combined_score": BEST_ENERGY / energy,
    }
