"""Evaluator of the Lennard-Jones cluster problem for 10 atoms (OpenEvolve task format).

A smaller instance of ``lennard_jones_13``, sized for a small model on a CPU; the contract and
the checks are the same. ``evaluate(program_path)`` imports the candidate, calls
``run_cluster()`` and checks the returned positions itself. A cluster is valid when

- the positions form a numeric array of shape (10, 3) (not booleans), all values finite;
- every coordinate lies in [-1000, 1000] (the energy does not change under translation, so the
  bound costs nothing; it keeps squared distances far from overflow);
- the atoms are distinct: every pair is at least 1e-6 apart (closer pairs are coincident
  atoms, whose energy is meaningless).

Its energy, in reduced units (epsilon = sigma = 1), is

    E = sum_{i<j} 4 (r_ij^-12 - r_ij^-6),

computed here from the positions (a value the program reports is never used). The putative
global minimum for 10 atoms is E = -28.422532 (Cambridge Cluster Database, LJ10; Wales & Doye
1997); benchmarks/task_references.py finds the same value by multi-start L-BFGS-B.

Metrics of a valid cluster: ``energy`` (lower is better), ``min_distance`` (closest pair),
``validity`` = 1.0 and ``combined_score`` = max(0, E / -28.422532) (higher is better; 1.0 at the
reference; 0.0 when E >= 0). An invalid cluster scores ``combined_score`` = 0.0 with an ``error``
naming the problem. Exceptions raised by the program itself propagate (the caller records the
traceback).
"""

import importlib.util
import sys
import uuid

import numpy as np

N_ATOMS = 10
BEST_ENERGY = -28.422532  # LJ10, Cambridge Cluster Database
MIN_DISTANCE = 1e-6
MAX_COORD = 1000.0


def _load_program(program_path):
    name = f"lj_candidate_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the program at {program_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _invalid(reason):
    return {"combined_score": 0.0, "validity": 0.0, "error": reason}


def to_positions(value):
    """Convert a returned value to a float array of shape (10, 3), or return an error string."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return f"positions must be an array of shape ({N_ATOMS}, 3), got {type(value).__name__}"
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:
        return f"positions are not an array of real numbers: {exc}"
    if raw.dtype == bool:
        return "positions hold booleans, not coordinates"
    if raw.dtype.kind not in "iuf":
        return f"positions are not an array of real numbers (dtype {raw.dtype})"
    pos = raw.astype(float)
    if pos.shape != (N_ATOMS, 3):
        return f"positions must have shape ({N_ATOMS}, 3), got {pos.shape}"
    if not np.all(np.isfinite(pos)):
        return "positions contain NaN or inf"
    if np.any(np.abs(pos) > MAX_COORD):
        i = int(np.argmax(np.max(np.abs(pos), axis=1)))
        return f"atom {i} has a coordinate beyond +-{MAX_COORD:g} (centre the cluster)"
    return pos


def pair_distances(pos):
    """Distances r_ij for i < j, with the index arrays (rows, cols)."""
    rows, cols = np.triu_indices(len(pos), k=1)
    diff = pos[rows] - pos[cols]
    return np.sqrt(np.sum(diff * diff, axis=1)), rows, cols


def lj_energy(pos):
    """sum_{i<j} 4 (r^-12 - r^-6) for a (n, 3) array of distinct atoms."""
    r, _, _ = pair_distances(pos)
    inv6 = (1.0 / r) ** 6
    return float(np.sum(4.0 * (inv6 * inv6 - inv6)))


def evaluate(program_path):
    """Validate the program's cluster and score it by its Lennard-Jones energy."""
    module = _load_program(program_path)
    if not callable(getattr(module, "run_cluster", None)):
        return _invalid("the program defines no run_cluster() function")
    pos = to_positions(module.run_cluster())
    if isinstance(pos, str):
        return _invalid(pos)
    r, rows, cols = pair_distances(pos)
    k = int(np.argmin(r))
    if r[k] < MIN_DISTANCE:
        return _invalid(
            f"atoms {int(rows[k])} and {int(cols[k])} coincide (distance {r[k]:.3g} < "
            f"{MIN_DISTANCE:g}); atoms must be distinct"
        )
    energy = lj_energy(pos)
    if not np.isfinite(energy):
        return _invalid(f"the energy is not finite ({energy!r})")
    return {
        "energy": energy,
        "min_distance": float(r[k]),
        "validity": 1.0,
        "combined_score": max(0.0, energy / BEST_ENERGY),
    }
