"""Student-t confidence intervals over seeds: for a variant's mean and for paired differences.

The t distribution is evaluated with the closed-form series for integer degrees of freedom
(Abramowitz & Stegun 26.7.3 and 26.7.4) and inverted by bisection, so quantiles are exact to
floating-point precision without scipy; one evaluation costs O(degrees of freedom).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


@dataclass(slots=True, frozen=True)
class MeanInterval:
    """A sample mean and its two-sided confidence half-width (None below two samples)."""

    mean: float  # NaN without samples
    half_width: float | None
    num_samples: int


def t_central_probability(t: float, degrees_of_freedom: int) -> float:
    """P(|T| <= t) for Student's t with a positive integer number of degrees of freedom."""
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees_of_freedom must be >= 1, got {degrees_of_freedom}")
    return _central_probability_at_angle(
        math.atan(abs(t) / math.sqrt(degrees_of_freedom)), degrees_of_freedom
    )


def _central_probability_at_angle(theta: float, degrees_of_freedom: int) -> float:
    cos_theta = math.cos(theta)
    cos_squared = cos_theta * cos_theta
    if degrees_of_freedom % 2 == 1:
        # Odd: (2/pi) * (theta + sin * sum_j c_j cos^(2j+1)), c_0 = 1, c_j = c_(j-1) * 2j/(2j+1).
        series = 0.0
        term = cos_theta
        for j in range((degrees_of_freedom - 1) // 2):
            if j > 0:
                term *= cos_squared * (2 * j) / (2 * j + 1)
            series += term
        return 2.0 / math.pi * (theta + math.sin(theta) * series)
    # Even: sin * sum_j d_j cos^(2j), d_0 = 1, d_j = d_(j-1) * (2j-1)/(2j).
    series = 0.0
    term = 1.0
    for j in range(degrees_of_freedom // 2):
        if j > 0:
            term *= cos_squared * (2 * j - 1) / (2 * j)
        series += term
    return math.sin(theta) * series


def t_quantile_two_sided(confidence: float, degrees_of_freedom: int) -> float:
    """The t with P(|T| <= t) = confidence, e.g. 12.706... for 0.95 and one degree of freedom."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees_of_freedom must be >= 1, got {degrees_of_freedom}")
    # The probability rises monotonically with the angle atan(t / sqrt(df)) over [0, pi/2).
    low, high = 0.0, math.pi / 2
    while True:
        middle = 0.5 * (low + high)
        if not low < middle < high:
            break
        if _central_probability_at_angle(middle, degrees_of_freedom) < confidence:
            low = middle
        else:
            high = middle
    return math.sqrt(degrees_of_freedom) * math.tan(0.5 * (low + high))


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanInterval:
    """Mean and Student-t half-width (sample standard deviation, n - 1 degrees of freedom)."""
    num_samples = len(values)
    if num_samples == 0:
        return MeanInterval(math.nan, None, 0)
    mean = math.fsum(values) / num_samples
    if num_samples == 1:
        return MeanInterval(mean, None, 1)
    variance = math.fsum((value - mean) ** 2 for value in values) / (num_samples - 1)
    standard_error = math.sqrt(variance / num_samples)
    return MeanInterval(
        mean,
        t_quantile_two_sided(confidence, num_samples - 1) * standard_error,
        num_samples,
    )


def paired_differences(
    baseline_by_seed: Mapping[int, float], other_by_seed: Mapping[int, float]
) -> list[float]:
    """other - baseline for each seed both have (ascending seed order); NaN values are skipped."""
    seeds = sorted(baseline_by_seed.keys() & other_by_seed.keys())
    differences = [other_by_seed[seed] - baseline_by_seed[seed] for seed in seeds]
    return [difference for difference in differences if not math.isnan(difference)]
