"""Which differences of NDG between two methods exceed the spread over seeds.

A bench on a small machine runs few seeds per method and task (three in
``benchmarks/protocols/local.yaml``), and a run's NDG varies a lot from seed to seed: one seed
finds an improvement, the next none. A difference of mean NDG is therefore read against the
seeds themselves, with no assumption about their distribution:

* the exact permutation test of the difference of means (`scipy.stats.permutation_test`,
  independent samples, two-sided, every split of the pooled runs into two groups of the
  original sizes). Its p-value cannot go below 2 / C(n1 + n2, n1): 0.1 for three seeds
  against three, so no difference on three seeds is significant at the 5% level;
* whether the two methods' seed ranges are apart (every seed of one above every seed of the
  other). For three seeds against three this is the same event as p = 0.1.

A difference is called beyond the seed spread when the ranges are apart and each method has at
least two seeds: a single seed has no spread to exceed, so one run against one is never called
beyond it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import permutation_test

__all__ = ["Difference", "difference"]


@dataclass(frozen=True)
class Difference:
    """One method against a reference method on one task, over their seeds.

    Attributes:
        values: the method's NDG per seed.
        reference: the reference method's NDG per seed.
        delta: mean of ``values`` minus mean of ``reference`` (None when either is empty).
        p_value: the exact two-sided permutation p-value of ``delta`` (None when a side has
            fewer than two values, or every value is equal).
    """

    values: list[float]
    reference: list[float]
    delta: float | None
    p_value: float | None

    @property
    def seeded(self) -> bool:
        """Whether both methods have the two or more seeds that a spread needs."""
        return min(len(self.values), len(self.reference)) >= 2

    @property
    def apart(self) -> bool:
        """Whether every seed of one method is above every seed of the other (two or more each)."""
        if not self.seeded:
            return False
        return min(self.values) > max(self.reference) or max(self.values) < min(self.reference)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    out: np.ndarray = np.mean(x, axis=axis) - np.mean(y, axis=axis)
    return out


def difference(values: Sequence[float], reference: Sequence[float]) -> Difference:
    """The difference of mean NDG of ``values`` over ``reference``, with its permutation p."""
    a, b = [float(v) for v in values], [float(v) for v in reference]
    if not a or not b:
        return Difference(a, b, None, None)
    delta = statistics.fmean(a) - statistics.fmean(b)
    if len(set(a + b)) == 1 or min(len(a), len(b)) < 2:
        return Difference(a, b, delta, None)
    result = permutation_test(
        (np.asarray(a), np.asarray(b)),
        _mean_difference,
        permutation_type="independent",
        alternative="two-sided",
        n_resamples=np.inf,
        vectorized=True,
    )
    return Difference(a, b, delta, float(result.pvalue))
