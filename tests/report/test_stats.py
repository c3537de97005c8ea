"""Student-t quantiles, mean intervals and paired differences over seeds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.report.stats import (
    MeanInterval,
    mean_interval,
    paired_differences,
    t_central_probability,
    t_quantile_two_sided,
)

NORMAL_QUANTILE_975 = 1.959963984540054
# Two-sided 95 % critical values of Student's t, as printed in standard tables (6 decimals).
T_TABLE_95 = {
    3: 3.182446,
    4: 2.776445,
    5: 2.570582,
    6: 2.446912,
    7: 2.364624,
    8: 2.306004,
    9: 2.262157,
    10: 2.228139,
    20: 2.085963,
    30: 2.042272,
}


def test_one_degree_of_freedom_is_cauchy():
    """df = 1 is the Cauchy distribution: t = tan(0.95 * pi / 2) = 12.7062047..."""
    assert t_quantile_two_sided(0.95, 1) == pytest.approx(math.tan(0.475 * math.pi), rel=1e-13)
    assert t_quantile_two_sided(0.95, 1) == pytest.approx(12.706204736, abs=1e-9)


def test_two_degrees_of_freedom_closed_form():
    """df = 2: P(|T| <= t) = t / sqrt(t^2 + 2), so t = 0.95 * sqrt(2 / (1 - 0.95^2)) = 4.3026527."""
    expected = 0.95 * math.sqrt(2.0 / (1.0 - 0.95**2))
    assert t_quantile_two_sided(0.95, 2) == pytest.approx(expected, rel=1e-13)
    assert t_quantile_two_sided(0.95, 2) == pytest.approx(4.302653, abs=1e-6)


@pytest.mark.parametrize(("degrees_of_freedom", "expected"), sorted(T_TABLE_95.items()))
def test_quantiles_match_the_printed_table(degrees_of_freedom, expected):
    """Odd and even series both reproduce the table to its 6 decimals."""
    assert t_quantile_two_sided(0.95, degrees_of_freedom) == pytest.approx(expected, abs=6e-7)


def test_three_degrees_of_freedom_probability_closed_form():
    """df = 3, t = 3: theta = atan(sqrt 3) = pi/3; P = (2/pi)(pi/3 + sin cos) = 2/3 + sqrt3/2pi."""
    expected = 2.0 / 3.0 + math.sqrt(3.0) / (2.0 * math.pi)
    assert t_central_probability(3.0, 3) == pytest.approx(expected, rel=1e-14)


@given(
    degrees_of_freedom=st.integers(min_value=1, max_value=400),
    confidence=st.floats(min_value=0.5, max_value=0.999),
)
def test_quantile_inverts_the_probability(degrees_of_freedom, confidence):
    """P(|T| <= quantile) gives back the confidence."""
    quantile = t_quantile_two_sided(confidence, degrees_of_freedom)
    assert t_central_probability(quantile, degrees_of_freedom) == pytest.approx(
        confidence, abs=1e-12
    )


@given(degrees_of_freedom=st.integers(min_value=1, max_value=300))
def test_quantile_falls_with_degrees_of_freedom_towards_the_normal(degrees_of_freedom):
    """Heavier tails with fewer samples; above the normal 1.95996 for every finite df."""
    quantile = t_quantile_two_sided(0.95, degrees_of_freedom)
    assert quantile > t_quantile_two_sided(0.95, degrees_of_freedom + 1) > NORMAL_QUANTILE_975


def test_bad_arguments_raise():
    """Zero degrees of freedom or a confidence outside (0, 1) are programming errors."""
    with pytest.raises(ValueError, match="degrees_of_freedom"):
        t_quantile_two_sided(0.95, 0)
    with pytest.raises(ValueError, match="confidence"):
        t_quantile_two_sided(1.0, 3)


def test_mean_interval_small_samples():
    """n=0: NaN and no CI; n=1: the value, no CI; n=2 of 0.5, 0.6: 0.55 ± 12.7062 x 0.05."""
    empty = mean_interval([])
    assert math.isnan(empty.mean) and empty.half_width is None and empty.num_samples == 0
    assert mean_interval([0.7]) == MeanInterval(0.7, None, 1)
    pair = mean_interval([0.5, 0.6])
    assert pair.mean == pytest.approx(0.55, abs=1e-15)
    assert pair.half_width == pytest.approx(math.tan(0.475 * math.pi) * 0.05, rel=1e-12)
    assert pair.num_samples == 2


def test_mean_interval_three_samples():
    """1, 2, 6: mean 3, s = sqrt(7), half-width 3.182446 x sqrt(7/3) = 4.861296."""
    interval = mean_interval([1.0, 2.0, 6.0])
    assert interval.mean == 3.0
    assert interval.half_width == pytest.approx(
        t_quantile_two_sided(0.95, 2) * math.sqrt(7.0 / 3.0), rel=1e-14
    )
    assert interval.half_width == pytest.approx(4.302653 * math.sqrt(7.0 / 3.0), abs=1e-5)


def test_paired_differences_match_seeds_and_skip_nan():
    """Seeds 0..3 vs 1..4: pairs are seeds 1, 2, 3 in order; seed 2's NaN drops its pair."""
    baseline = {0: 1.0, 1: 2.0, 2: math.nan, 3: 4.0}
    other = {3: 10.0, 1: 5.0, 2: 7.0, 4: 1.0}
    assert paired_differences(baseline, other) == [3.0, 6.0]
