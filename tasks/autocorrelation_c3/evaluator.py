"""Evaluator for the third autocorrelation inequality, C3 (OpenEvolve task format).

Definition (AlphaEvolve 2025, problem "third autocorrelation inequality"; SimpleTES): for a
real-valued step function f on [-1/4, 1/4] (signed heights allowed), minimise

    C3(f) = max_t |(f * f)(t)| / (∫ f)^2 .

A candidate is n heights f[0..n-1] on n equal steps of width dx = 0.5 / n. The discrete form
used here (exactly the published one) is

    C3 = max_k |sum_i f[i] f[k - i]| * dx / (sum_i f[i] * dx)^2      (k over all 2n - 1 lags)

i.e. the full discrete autoconvolution times dx, divided by the squared Riemann-sum integral.
C3 does not change when f is multiplied by a nonzero constant; the evaluator divides f by
max|f| before computing (this only avoids overflow). For every f with a nonzero sum,
C3 >= 2n / (2n - 1) > 1, so the score cannot blow up.

``evaluate(program_path)`` imports the candidate, calls ``run_code()`` and checks the heights
itself; a value reported by the program is never used. Validity:

- a 1-D array of real numbers (no booleans), 1 <= n <= 65536 (the cap bounds evaluation time);
- every height finite;
- the integral is clearly nonzero: |sum(f)| >= 1e-12 * sum(|f|) (otherwise the ratio is
  numerically meaningless).

Metrics of a valid candidate: ``c3`` (the reported quantity, lower is better), ``n_points``,
``validity`` = 1.0 and ``combined_score`` = 1.453675 / c3 (higher is better; 1.0 matches the
best known value). An invalid candidate scores ``combined_score`` = 0.0, ``validity`` = 0.0 with
an ``error``; ``c3`` is then omitted. Exceptions raised by the program itself propagate.
"""

import importlib.util
import sys
import uuid

import numpy as np

# Best known C3 upper bound: 1.453675 (SimpleTES, 2025/26); AlphaEvolve (2025) reported 1.4557.
BEST_KNOWN = 1.453675
MIN_POINTS = 1
MAX_POINTS = 65536
DOMAIN_LENGTH = 0.5  # [-1/4, 1/4]
CANCELLATION_TOL = 1e-12


def _load_program(program_path):
    name = f"candidate_program_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def check_heights(values):
    """Validate the heights: (f as a float ndarray, None) or (None, message)."""
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError) as exc:
        return None, f"heights are not an array of numbers: {exc}"
    if raw.dtype.kind not in "iuf":
        return None, f"heights must be real numbers, got dtype {raw.dtype}"
    f = raw.astype(float)
    if f.ndim != 1:
        return None, f"heights must be a 1-D array, got shape {f.shape}"
    n = f.shape[0]
    if not MIN_POINTS <= n <= MAX_POINTS:
        return None, f"heights must have between {MIN_POINTS} and {MAX_POINTS} values, got {n}"
    if not np.all(np.isfinite(f)):
        return None, "heights contain NaN or inf"
    peak = float(np.max(np.abs(f)))
    if peak == 0.0:
        return None, "all heights are 0; the integral of f must be nonzero"
    f = f / peak  # C3 is scale-invariant; this only prevents overflow
    total = float(np.sum(f))
    if abs(total) < CANCELLATION_TOL * float(np.sum(np.abs(f))):
        return None, (
            f"the integral of f is numerically zero (sum(f) = {total * peak!r}); C3 is undefined"
        )
    return f, None


def compute_c3(f):
    """C3 = max|f * f| * dx / (sum(f) * dx)^2 with dx = 0.5 / n."""
    dx = DOMAIN_LENGTH / f.shape[0]
    peak = float(np.max(np.abs(np.convolve(f, f, mode="full"))))
    integral = float(np.sum(f)) * dx
    return peak * dx / (integral * integral)


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def evaluate(program_path):
    """Validate the heights returned by ``run_code()`` and score them by C3."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_code", None)):
        return _invalid("the program defines no run_code() function")
    f, problem = check_heights(module.run_code())
    if problem is not None:
        return _invalid(problem)
    c3 = compute_c3(f)
    if not np.isfinite(c3) or c3 <= 0.0:
        return _invalid(f"computed C3 is not a positive finite number: {c3!r}")
    return {
        "c3": c3,
        "n_points": float(f.shape[0]),
        "validity": 1.0,
        "combined_score": BEST_KNOWN / c3,
    }
