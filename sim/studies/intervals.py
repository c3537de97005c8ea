"""Confidence intervals for a mean over a few independent trials (Student's t, no scipy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

_INTEGRATION_POINTS = 4001  # odd, for Simpson's rule
_BISECTION_STEPS = 60


def _student_t_central_probability(t: float, degrees_of_freedom: int) -> float:
    """P(|T| <= t) for Student's t, by Simpson's rule over the density on [0, t]."""
    nu = float(degrees_of_freedom)
    log_scale = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi)
    xs = np.linspace(0.0, t, _INTEGRATION_POINTS)
    density = np.exp(log_scale - (nu + 1) / 2 * np.log1p(xs * xs / nu))
    weights = np.ones(_INTEGRATION_POINTS)
    weights[1:-1:2] = 4.0
    weights[2:-1:2] = 2.0
    return float(2.0 * (t / (_INTEGRATION_POINTS - 1)) / 3.0 * np.dot(weights, density))


def student_t_critical_value(confidence: float, degrees_of_freedom: int) -> float:
    """The t with P(|T| <= t) = confidence, e.g. 2.776 for 95 % and 4 degrees of freedom."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if degrees_of_freedom < 1:
        raise ValueError(f"degrees_of_freedom must be >= 1, got {degrees_of_freedom}")
    low, high = 0.0, 1.0
    while _student_t_central_probability(high, degrees_of_freedom) < confidence:
        low, high = high, 2 * high
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) / 2
        if _student_t_central_probability(middle, degrees_of_freedom) < confidence:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def mean_confidence_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """(mean, low, high): the mean +- t * s / sqrt(n) over independent trials (n >= 2)."""
    if len(values) < 2:
        raise ValueError(f"a confidence interval needs at least 2 trials, got {len(values)}")
    samples = np.asarray(values, dtype=float)
    mean = float(samples.mean())
    half_width = (
        student_t_critical_value(confidence, len(samples) - 1)
        * float(samples.std(ddof=1))
        / math.sqrt(len(samples))
    )
    return mean, mean - half_width, mean + half_width
