"""Evaluator of the pressure-vessel design problem (Sandgren 1990; Kannan & Kramer 1994).

A cylindrical vessel capped by hemispherical heads must hold 1,296,000 cubic inches (750 ft^3).
The design variables (inches) are

- x1 = Ts, shell thickness, and x2 = Th, head thickness: whole multiples of 0.0625 (1/16 in)
  between 1 * 0.0625 and 99 * 0.0625 (the standard mixed discrete-continuous formulation);
- x3 = R, inner radius, and x4 = L, length of the cylindrical section: 10 <= x3, x4 <= 200.

Cost (material, forming and welding), to be minimised:

    f = 0.6224 x1 x3 x4 + 1.7781 x2 x3^2 + 3.1661 x1^2 x4 + 19.84 x1^2 x3

subject to

    g1 = -x1 + 0.0193 x3 <= 0                       (shell thickness vs. radius)
    g2 = -x2 + 0.00954 x3 <= 0                      (head thickness vs. radius)
    g3 = -pi x3^2 x4 - (4/3) pi x3^3 + 1296000 <= 0  (enclosed volume)
    g4 = x4 - 240 <= 0                               (length; implied by x4 <= 200)

The best known and proven global minimum of this formulation is f = 6059.714335 at
x = (0.8125, 0.4375, 42.0984456, 176.6365958) (Yang, Huyck, Karamanoglu & Khan 2013, "True global
optimality of the pressure vessel design problem").

Validation (``evaluate`` checks the design itself; a reported cost is never used):

- the design is a list/tuple/array of exactly 4 finite numbers (not booleans);
- the thickness grid: x1 and x2 must each lie within 1e-9 of k * 0.0625 for an integer k in
  1..99. Off-grid values are REJECTED, not rounded (the discrete formulation: a plate is bought
  in 1/16 in steps). Accepted values are snapped to their exact grid value k * 0.0625, which is
  then used for the constraints and the cost, so the 1e-9 slack cannot lower the cost;
- bounds: 10 <= x3, x4 <= 200, with an absolute tolerance of 1e-9;
- constraints, with tolerance 1e-9 on a common relative scale: g1 <= 1e-9, g2 <= 1e-9 (inches),
  g3 / 1296000 <= 1e-9 (volume may fall short by at most 1.3e-3 cubic inches), g4 <= 1e-9.

Metrics of a feasible design: ``cost`` (f, lower is better), ``g1``..``g4``, ``validity`` = 1.0
and ``combined_score`` = 6059.714335048436 / f (higher is better; 1.0 at the optimum). An
infeasible or malformed design scores ``combined_score`` = 0.0 with an ``error`` naming the
violated rule. Exceptions raised by the program itself propagate (the caller records the
traceback).
"""

import importlib.util
import math
import sys
import uuid

import numpy as np

PLATE = 0.0625
K_MIN, K_MAX = 1, 99
X_MIN, X_MAX = 10.0, 200.0
VOLUME = 1296000.0
GRID_TOL = 1e-9
TOL = 1e-9
BEST_COST = 6059.714335048436  # proven global minimum (Yang et al. 2013)


def _load_program(program_path):
    name = f"vessel_candidate_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def vessel_cost(x1, x2, x3, x4):
    """The pressure-vessel cost f(x)."""
    return 0.6224 * x1 * x3 * x4 + 1.7781 * x2 * x3**2 + 3.1661 * x1**2 * x4 + 19.84 * x1**2 * x3


def vessel_constraints(x1, x2, x3, x4):
    """The four constraint values (g1, g2, g3, g4); feasible when all are <= 0."""
    return (
        -x1 + 0.0193 * x3,
        -x2 + 0.00954 * x3,
        -math.pi * x3**2 * x4 - (4.0 / 3.0) * math.pi * x3**3 + VOLUME,
        x4 - 240.0,
    )


def check_design(value):
    """Return (x1, x2, x3, x4) as floats with x1, x2 snapped to the grid, or an error string."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return f"the design must be 4 numbers (x1, x2, x3, x4), got {type(value).__name__}"
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return f"the design is not an array of real numbers: {exc}"
    if raw.dtype == bool:
        return "the design holds booleans, not numbers"
    if raw.dtype.kind not in "iuf":
        return f"the design is not an array of real numbers (dtype {raw.dtype})"
    x = raw.astype(float)
    if x.shape != (4,):
        return f"the design must have shape (4,) = (x1, x2, x3, x4), got {x.shape}"
    if not np.all(np.isfinite(x)):
        return "the design contains NaN or inf"
    snapped = []
    for name, v in (("x1 (shell thickness)", x[0]), ("x2 (head thickness)", x[1])):
        k = round(float(v) / PLATE)
        if abs(float(v) - k * PLATE) > GRID_TOL:
            return (
                f"{name} = {float(v)!r} is not a whole multiple of 0.0625 (nearest: "
                f"{k * PLATE!r}); thicknesses come in 1/16 inch steps"
            )
        if not K_MIN <= k <= K_MAX:
            return (
                f"{name} = {k} * 0.0625 is outside the bounds "
                f"[{K_MIN} * 0.0625, {K_MAX} * 0.0625] = [{K_MIN * PLATE}, {K_MAX * PLATE}]"
            )
        snapped.append(k * PLATE)
    for name, v in (("x3 (radius)", x[2]), ("x4 (length)", x[3])):
        if not X_MIN - TOL <= v <= X_MAX + TOL:
            return f"{name} = {float(v)!r} is outside the bounds [{X_MIN:g}, {X_MAX:g}]"
    return snapped[0], snapped[1], float(x[2]), float(x[3])


def evaluate(program_path):
    """Validate the program's design and score it by its cost."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_design", None)):
        return _invalid("the program defines no run_design() function")
    design = check_design(module.run_design())
    if isinstance(design, str):
        return _invalid(design)
    g1, g2, g3, g4 = vessel_constraints(*design)
    x1, x2, x3, x4 = design
    if g1 > TOL:
        return _invalid(
            f"constraint g1 violated: 0.0193 * x3 = {0.0193 * x3:.9f} > x1 = {x1} "
            f"(g1 = {g1:.3g}); the shell is too thin for the radius"
        )
    if g2 > TOL:
        return _invalid(
            f"constraint g2 violated: 0.00954 * x3 = {0.00954 * x3:.9f} > x2 = {x2} "
            f"(g2 = {g2:.3g}); the heads are too thin for the radius"
        )
    if g3 / VOLUME > TOL:
        return _invalid(
            f"constraint g3 violated: volume pi x3^2 x4 + 4/3 pi x3^3 = {VOLUME - g3:.6f} < "
            f"{VOLUME:.0f} cubic inches (g3 = {g3:.6g})"
        )
    if g4 > TOL:
        return _invalid(f"constraint g4 violated: x4 = {x4!r} > 240")
    cost = vessel_cost(*design)
    return {
        "cost": cost,
        "g1": g1,
        "g2": g2,
        "g3": g3,
        "g4": g4,
        "validity": 1.0,
        "combined_score": BEST_COST / cost,
    }
