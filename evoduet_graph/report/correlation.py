"""Rank correlation of predicted vs realised child scores, with its confidence interval.

The paper reads hypothetical evidence scoring by how well the predicted child score orders the
realised one; a mean and a scatter do not say that. `rank_correlation` gives Spearman's ρ
(`scipy.stats.spearmanr`, ties averaged), the number of pairs, and a 95% confidence interval
from Fisher's z-transform with the variance 1.06 / (n − 3) that Fieller, Hartley and Pearson
(1957) give for Spearman's ρ. The interval needs at least 4 pairs; ρ needs 3 pairs and values
that vary on both sides (else it is undefined and reported as None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["RankCorrelation", "rank_correlation"]

_Z_95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class RankCorrelation:
    """Spearman's ρ over ``n`` (predicted, realised) pairs and its 95% interval.

    Attributes:
        n: pairs used.
        rho: Spearman's ρ, or None (fewer than 3 pairs, or a constant side).
        low: lower end of the 95% interval, or None (ρ undefined or fewer than 4 pairs).
        high: upper end, likewise.
    """

    n: int
    rho: float | None
    low: float | None
    high: float | None

    def text(self) -> str:
        """``ρ = 0.42 (95% CI −0.10 to 0.77, n = 12)``, or ``n = 2: too few pairs``."""
        if self.rho is None:
            return f"n = {self.n}: ρ undefined (too few pairs or no variation)"
        ci = f"95% CI {self.low:+.2f} to {self.high:+.2f}, " if self.low is not None else ""
        return f"ρ = {self.rho:+.2f} ({ci}n = {self.n})"


def rank_correlation(pairs: Iterable[Sequence[float]]) -> RankCorrelation:
    """Spearman's ρ of ``(predicted, realised)`` pairs with its Fisher-z 95% interval.

    Pairs with a missing or non-finite value are left out.
    """
    from scipy.stats import spearmanr  # start-up: ~600 ms, paid only when a report correlates

    kept = [
        (float(p), float(r))
        for p, r in pairs
        if p is not None and r is not None and math.isfinite(p) and math.isfinite(r)
    ]
    n = len(kept)
    if n < 3 or len({p for p, _ in kept}) < 2 or len({r for _, r in kept}) < 2:
        return RankCorrelation(n, None, None, None)
    rho = float(spearmanr([p for p, _ in kept], [r for _, r in kept]).statistic)
    if not math.isfinite(rho):
        return RankCorrelation(n, None, None, None)
    if n < 4:
        return RankCorrelation(n, rho, None, None)
    z = math.atanh(max(min(rho, 1 - 1e-12), -1 + 1e-12))
    half = _Z_95 * math.sqrt(1.06 / (n - 3))
    return RankCorrelation(n, rho, math.tanh(z - half), math.tanh(z + half))
