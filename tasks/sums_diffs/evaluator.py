"""Evaluator for the sums-versus-differences problem (OpenEvolve task format).

Definition (AlphaEvolve 2025, "sums and differences of sets"; SimpleTES sums_diffs): for a
finite set A of integers with |A| >= 2,

    c(A) = log(|A + A| / |A|) / log(|A - A| / |A|),

where A + A = {a + b} and A - A = {a - b} over all pairs of elements of A. Larger c(A) is a
better lower bound on the exponent C in |A + A| / |A| <= (|A - A| / |A|)^C. For |A| >= 2 both
|A + A| and |A - A| are at least 2|A| - 1 > |A|, so c(A) is a positive finite number.

``evaluate(program_path)`` imports the candidate, calls ``run_code()`` and recomputes both set
sizes exactly with Python integers; a value reported by the program is never used. Validity:

- ``run_code()`` returns a list, tuple, set, frozenset or 1-D numpy array of integers (Python or
  numpy ints; floats only when they are exactly integral; booleans are rejected);
- every element lies in [-1_000_000, 1_000_000] (the public protocol's bound);
- after removing duplicates (A is a set), 2 <= |A| <= 512.

Metrics of a valid set: ``c_ratio`` = c(A) (the reported quantity, higher is better),
``set_size``, ``sumset_size``, ``diffset_size``, ``validity`` = 1.0 and ``combined_score`` =
c(A) / 1.144887 (1.0 matches the best known value under these size limits). An invalid set
scores ``combined_score`` = 0.0, ``c_ratio`` = 0.0, ``validity`` = 0.0 with an ``error``.
Exceptions raised by the program itself propagate.
"""

import importlib.util
import math
import numbers
import sys
import uuid

import numpy as np

# Best known c(A) with 2 <= |A| <= 512: 1.144887 (SimpleTES, 2025/26). AlphaEvolve's larger
# bound (about 1.158) used sets far beyond 512 elements and does not apply here.
BEST_KNOWN = 1.144887
MIN_SIZE = 2
MAX_SIZE = 512
MAX_ABS = 1_000_000


def _load_program(program_path):
    name = f"candidate_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _as_int(value):
    """An element as a Python int, or None when it is not an integer."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value) and value.is_integer():
            return int(value)
    return None


def check_set(values):
    """Validate the candidate: (sorted list of distinct ints, None) or (None, message)."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            return None, f"A must be a 1-D array, got shape {values.shape}"
        items = values.tolist()
    elif isinstance(values, (list, tuple, set, frozenset)):
        items = list(values)
    else:
        return None, (
            "run_code() must return a list, tuple, set or 1-D numpy array of integers, got "
            f"{type(values).__name__}"
        )
    elements = set()
    for index, item in enumerate(items):
        value = _as_int(item)
        if value is None:
            return None, f"element {index} ({item!r}) is not an integer"
        if abs(value) > MAX_ABS:
            return None, f"element {index} = {value} is outside [-{MAX_ABS}, {MAX_ABS}]"
        elements.add(value)
    if not MIN_SIZE <= len(elements) <= MAX_SIZE:
        return None, (
            f"A must have between {MIN_SIZE} and {MAX_SIZE} distinct integers, got {len(elements)}"
        )
    return sorted(elements), None


def set_stats(elements):
    """(|A|, |A + A|, |A - A|, c(A)) for a list of distinct integers, |A| >= 2."""
    size = len(elements)
    sums = {a + b for a in elements for b in elements}
    diffs = {a - b for a in elements for b in elements}
    c = math.log(len(sums) / size) / math.log(len(diffs) / size)
    return size, len(sums), len(diffs), c


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "c_ratio": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the set returned by ``run_code()`` and score it by c(A)."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_code", None)):
        return _invalid("the program defines no run_code() function")
    elements, problem = check_set(module.run_code())
    if problem is not None:
        return _invalid(problem)
    size, n_sums, n_diffs, c = set_stats(elements)
    return {
        "c_ratio": c,
        "set_size": float(size),
        "sumset_size": float(n_sums),
        "diffset_size": float(n_diffs),
        "validity": 1.0,
        "combined_score": c / BEST_KNOWN,
    }
