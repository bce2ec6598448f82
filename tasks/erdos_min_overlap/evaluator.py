"""Evaluator for the Erdős minimum overlap problem (OpenEvolve task format).

Definition (continuous form, as in AlphaEvolve 2025 and SimpleTES): minimise

    C5(h) = max_k  ∫ h(x) (1 - h(x + k)) dx

over step functions h: [0, 2] -> [0, 1] with ∫ h = 1, where 1 - h is taken as 0 outside [0, 2].
A candidate is n heights h[0..n-1] on n equal steps of width dx = 2 / n, so ∫ h = 1 means
sum(h) = n / 2, and

    C5 = dx * max_k sum_i h[i] (1 - h[i + k])    (k over all 2n - 1 shifts; the full
                                                  discrete correlation of h with 1 - h).

``evaluate(program_path)`` imports the candidate, calls ``run_code()`` and checks the heights
itself; a value reported by the program is never used. Validity:

- a 1-D array of real numbers (no booleans), 2 <= n <= 65536 (the cap bounds evaluation time);
- every height finite and 0 <= h[i] <= 1 (no tolerance);
- sum(h) > 0.

Normalisation (following the public SimpleTES verifier): when sum(h) != n / 2 the heights are
rescaled by (n / 2) / sum(h). A rescaled height above 1 + 1e-9 makes the candidate invalid (the
integral constraint cannot be met by scaling); heights above 1 by at most 1e-9 (floating-point
rounding) are clipped to 1. The metric is computed on the rescaled heights.

Metrics of a valid candidate: ``c5`` (the reported quantity, lower is better), ``n_points``,
``scale`` (the rescaling factor applied, 1.0 when none), ``validity`` = 1.0 and
``combined_score`` = 0.380868 / c5 (higher is better; 1.0 matches the best known value).
An invalid candidate scores ``combined_score`` = 0.0, ``validity`` = 0.0 with an ``error``; ``c5``
is then omitted. Exceptions raised by the program itself propagate (the sandbox records them).
"""

import importlib.util
import sys
import uuid

import numpy as np

# Best known C5 upper bound: 0.380868 (SimpleTES, 2025/26); AlphaEvolve (2025) reported 0.380924.
BEST_KNOWN = 0.380868
MIN_POINTS = 2
MAX_POINTS = 65536
SCALE_TOL = 1e-9


def _load_program(program_path):
    name = f"candidate_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def normalise_heights(values):
    """Validate and rescale the heights.

    Returns:
        (h, scale, None) with h a float ndarray summing to n / 2 (up to rounding), or
        (None, None, message) when the candidate is invalid.
    """
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:
        return None, None, f"h is not an array of numbers: {exc}"
    if raw.dtype.kind not in "iuf":
        return None, None, f"h must hold real numbers, got dtype {raw.dtype}"
    h = raw.astype(float)
    if h.ndim != 1:
        return None, None, f"h must be a 1-D array, got shape {h.shape}"
    n = h.shape[0]
    if not MIN_POINTS <= n <= MAX_POINTS:
        return None, None, f"h must have between {MIN_POINTS} and {MAX_POINTS} values, got {n}"
    if not np.all(np.isfinite(h)):
        return None, None, "h contains NaN or inf"
    if np.any(h < 0.0) or np.any(h > 1.0):
        i = int(np.argmin(h)) if np.any(h < 0.0) else int(np.argmax(h))
        return None, None, f"h[{i}] = {h[i]!r} is outside [0, 1]"
    total = float(np.sum(h))
    if total <= 0.0:
        return None, None, "sum(h) is 0; the integral of h must be 1 (sum(h) = n / 2)"
    scale = (n / 2.0) / total
    if scale != 1.0:
        h = h * scale
        peak = float(np.max(h))
        if peak > 1.0 + SCALE_TOL:
            message = (
                f"sum(h) = {total!r} but must be n / 2 = {n / 2}; rescaling h to that sum "
                f"pushes max(h) to {peak:.9f} > 1"
            )
            return None, None, message
        h = np.minimum(h, 1.0)
    return h, scale, None


def compute_c5(h):
    """C5 = (2 / n) * max over all shifts of the correlation of h with 1 - h."""
    n = h.shape[0]
    correlation = np.correlate(h, 1.0 - h, mode="full")
    return float(np.max(correlation)) * (2.0 / n)


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the step function returned by ``run_code()`` and score it by C5."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_code", None)):
        return _invalid("the program defines no run_code() function")
    h, scale, problem = normalise_heights(module.run_code())
    if problem is not None:
        return _invalid(problem)
    c5 = compute_c5(h)
    if not np.isfinite(c5) or c5 <= 0.0:
        return _invalid(f"computed C5 is not a positive finite number: {c5!r}")
    return {
        "c5": c5,
        "n_points": float(h.shape[0]),
        "scale": float(scale),
        "validity": 1.0,
        "combined_score": BEST_KNOWN / c5,
    }
