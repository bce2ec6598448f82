"""Evaluator for the maximal determinant problem of order 29 (OpenEvolve task format).

Definition (SimpleTES "Hadamard maximal determinant, n = 29"): find a 29 x 29 matrix with every
entry +1 or -1 whose determinant has the largest absolute value. The reported quantity is

    det_ratio = |det(H)| / 1270698346568170340352,

where 1270698346568170340352 = 2^28 * 342 * 7^12 is the normalising constant of the public
SimpleTES evaluator (about 1.27e21). The determinant of a 29 x 29 +-1 matrix is always a
multiple of 2^28, so det_ratio = (|det| / 2^28) / (342 * 7^12); the best known value
0.935673 corresponds to |det| = 2^28 * 320 * 7^12 (320 / 342 = 0.9356725...).

``evaluate(program_path)`` imports the candidate, calls ``run_code()`` and computes the
determinant exactly: the entries are converted to Python ints and reduced with fraction-free
Gaussian elimination (Bareiss), so no floating-point determinant is ever used. Validity:

- a 29 x 29 array of real numbers (booleans rejected), every entry exactly +1 or -1
  (1.0 and -1.0 are accepted; 0.999 or NaN are not);
- the determinant is nonzero (a singular matrix scores 0).

(The public evaluator's comment calls the constant 29^(29/2), but 29^14.5 is about 1.60e21;
the constant itself, not that comment, defines the published ratios, so it is kept exactly.)

Metrics of a valid matrix: ``det_ratio`` (the reported quantity, higher is better),
``det_over_2_28`` = |det| / 2^28 (an exact integer below 2^53, so it carries the exact
determinant), ``abs_det`` (|det| as a float), ``validity`` = 1.0 and ``combined_score`` =
det_ratio. An invalid matrix scores ``combined_score`` = 0.0, ``det_ratio`` = 0.0,
``validity`` = 0.0 with an ``error``. Exceptions raised by the program itself propagate.
"""

import importlib.util
import sys
import uuid
from fractions import Fraction

import numpy as np

ORDER = 29
# Normalising constant of the SimpleTES hadamard_maximal_det_29 evaluator: 2^28 * 342 * 7^12.
NORMALISER = 1270698346568170340352
# Best known det_ratio: 0.935673 (SimpleTES, 2025/26), i.e. |det| = 2^28 * 320 * 7^12.
BEST_KNOWN = 0.935673


def _load_program(program_path):
    name = f"candidate_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def exact_determinant(rows):
    """Exact determinant of a square integer matrix (Bareiss fraction-free elimination).

    Args:
        rows: a list of n lists of n Python ints.

    Returns:
        The determinant as a Python int (1 for the empty matrix).
    """
    a = [list(map(int, row)) for row in rows]
    n = len(a)
    if any(len(row) != n for row in a):
        raise ValueError("exact_determinant needs a square matrix")
    sign = 1
    previous = 1
    for k in range(n - 1):
        if a[k][k] == 0:
            pivot = next((i for i in range(k + 1, n) if a[i][k] != 0), None)
            if pivot is None:
                return 0
            a[k], a[pivot] = a[pivot], a[k]
            sign = -sign
        akk = a[k][k]
        row_k = a[k]
        for i in range(k + 1, n):
            row_i = a[i]
            aik = row_i[k]
            for j in range(k + 1, n):
                # Bareiss: the division is exact by Sylvester's identity.
                row_i[j] = (row_i[j] * akk - aik * row_k[j]) // previous
            row_i[k] = 0
        previous = akk
    return sign * a[n - 1][n - 1] if n else 1


def check_matrix(value):
    """Validate the matrix: (list of lists of +-1 ints, None) or (None, message)."""
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return None, f"the matrix is not an array of numbers: {exc}"
    if raw.dtype.kind == "b":
        return None, "entries must be the numbers +1 and -1, got booleans"
    if raw.dtype.kind not in "iuf":
        return None, f"entries must be real numbers +1 or -1, got dtype {raw.dtype}"
    if raw.shape != (ORDER, ORDER):
        return None, f"the matrix must have shape ({ORDER}, {ORDER}), got {raw.shape}"
    ok = (raw == 1) | (raw == -1)
    if not np.all(ok):
        i, j = (int(v) for v in np.argwhere(~ok)[0])
        return None, f"entry ({i}, {j}) = {raw[i, j]!r} is not +1 or -1"
    return [[1 if v == 1 else -1 for v in row] for row in raw.tolist()], None


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "det_ratio": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the matrix returned by ``run_code()`` and score it by its exact |det|."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_code", None)):
        return _invalid("the program defines no run_code() function")
    rows, problem = check_matrix(module.run_code())
    if problem is not None:
        return _invalid(problem)
    abs_det = abs(exact_determinant(rows))
    if abs_det == 0:
        return _invalid("the matrix is singular (det = 0)")
    ratio = float(Fraction(abs_det, NORMALISER))
    return {
        "det_ratio": ratio,
        "det_over_2_28": float(Fraction(abs_det, 1 << 28)),
        "abs_det": float(abs_det),
        "validity": 1.0,
        "combined_score": ratio,
    }
