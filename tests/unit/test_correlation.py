"""Spearman's rank correlation of predicted vs realised child scores, with its interval."""

from __future__ import annotations

import math

import pytest
from scipy.stats import spearmanr

from evoduet_graph.report.correlation import rank_correlation


def test_rho_is_scipys_and_the_interval_is_fisher_z_with_the_spearman_variance():
    predicted = [0.1, 0.4, 0.35, 0.8, 0.5, 0.9, 0.2, 0.7]
    realised = [0.2, 0.3, 0.5, 0.6, 0.4, 0.95, 0.1, 0.9]
    rank = rank_correlation(zip(predicted, realised, strict=True))
    rho = spearmanr(predicted, realised).statistic
    assert rank.n == 8 and rank.rho == pytest.approx(rho)
    half = 1.959964 * math.sqrt(1.06 / 5)
    assert rank.low == pytest.approx(math.tanh(math.atanh(rho) - half), abs=1e-6)
    assert rank.high == pytest.approx(math.tanh(math.atanh(rho) + half), abs=1e-6)
    assert rank.low < rank.rho < rank.high
    assert rank.text().startswith(f"ρ = {rho:+.2f} (95% CI ")


def test_a_perfect_order_has_rho_one_and_an_interval_inside_minus_one_to_one():
    rank = rank_correlation([(i, 10 * i) for i in range(6)])
    assert rank.rho == pytest.approx(1.0)
    assert -1.0 <= rank.low <= rank.high <= 1.0


@pytest.mark.parametrize(
    ("pairs", "n", "has_rho", "has_interval"),
    [
        ([], 0, False, False),
        ([(1.0, 2.0), (2.0, 3.0)], 2, False, False),  # too few pairs
        ([(1.0, 2.0), (1.0, 3.0), (1.0, 4.0), (1.0, 5.0)], 4, False, False),  # constant side
        ([(1.0, 2.0), (2.0, 1.0), (3.0, 3.0)], 3, True, False),  # ρ, but no interval at n=3
        ([(1.0, None), (float("nan"), 1.0), (1.0, 2.0)], 1, False, False),  # missing values
    ],
)
def test_too_little_data_says_so_instead_of_a_number(pairs, n, has_rho, has_interval):
    rank = rank_correlation(pairs)
    assert rank.n == n
    assert (rank.rho is not None) is has_rho
    assert (rank.low is not None) is has_interval
    if not has_rho:
        assert "undefined" in rank.text()
