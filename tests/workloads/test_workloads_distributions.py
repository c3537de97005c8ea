"""Length and duration distributions: validation and sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.api import Exponential, Fixed, LogNormal, Uniform, WorkloadError


def test_fixed_consumes_no_randomness() -> None:
    rng = np.random.default_rng(1)
    assert Fixed(12.4).sample_count(rng) == 12 and Fixed(0).sample_count(rng, minimum=1) == 1
    assert rng.random() == np.random.default_rng(1).random()


def test_uniform_counts_cover_every_integer_in_range_equally() -> None:
    rng = np.random.default_rng(2)
    draws = [Uniform(2, 5).sample_count(rng) for _ in range(8000)]
    counts = np.bincount(draws)
    assert counts[:2].sum() == 0 and len(counts) == 6
    assert all(1850 < count < 2150 for count in counts[2:])


def test_lognormal_has_its_median_and_stays_within_its_bounds() -> None:
    rng = np.random.default_rng(3)
    draws = np.array([LogNormal(median=150, sigma=0.9).sample(rng) for _ in range(20_000)])
    assert 145 < np.median(draws) < 155
    assert 0.88 < np.log(draws).std() < 0.92
    clipped = [LogNormal(median=150, sigma=2.0, low=10, high=300).sample(rng) for _ in range(2000)]
    assert min(clipped) == 10 and max(clipped) == 300


def test_exponential_mean() -> None:
    rng = np.random.default_rng(4)
    draws = [Exponential(mean=2.0).sample(rng) for _ in range(20_000)]
    assert 1.95 < float(np.mean(draws)) < 2.05


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Fixed(-1), r"Fixed.value: -1 is not allowed; use a finite number >= 0.0"),
        (lambda: Uniform(5, 2), r"Uniform.high: 2 is not allowed; use a number >= low \(5\)"),
        (lambda: Uniform(2.2, 2.8), r"holds no integer"),
        (
            lambda: LogNormal(median=0, sigma=1),
            r"LogNormal.median: 0 is not allowed; use a finite number > 0.0",
        ),
        (lambda: LogNormal(median=1, sigma=math.nan), r"LogNormal.sigma: nan is not allowed"),
        (lambda: LogNormal(median=1, sigma=1, low=5, high=2), r"LogNormal.high: 2 is not allowed"),
        (lambda: Exponential(mean=True), r"Exponential.mean: True is not allowed"),
    ],
)
def test_invalid_parameters_name_the_field(make, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        make()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(0, 12),
    distribution=st.sampled_from(
        [
            Fixed(3.5),
            Uniform(1, 8),
            Uniform(0.5, 2.5),
            LogNormal(median=64, sigma=0.8, low=4, high=2048),
            LogNormal(median=0.02, sigma=2.5, low=0.005, high=70),
            Exponential(mean=20.0),
        ]
    ),
)
def test_a_draw_of_size_n_equals_n_single_draws(
    seed: int, size: int, distribution: Fixed | Uniform | LogNormal | Exponential
) -> None:
    """Sessions draw their lengths and times `size` at a time: the values, and where the
    stream stands afterwards, are those of drawing them one by one."""
    one_by_one, at_once = np.random.default_rng(seed), np.random.default_rng(seed)
    counts = [distribution.sample_count(one_by_one, minimum=1) for _ in range(size)]
    values = [distribution.sample(one_by_one) for _ in range(size)]
    assert distribution.sample_counts(at_once, size, minimum=1) == counts
    assert distribution.samples(at_once, size) == values
    assert all(type(count) is int and count >= 1 for count in counts)
    assert one_by_one.random() == at_once.random()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    median=st.floats(0.01, 500.0),
    sigma=st.floats(0.0, 3.0),
    low=st.sampled_from([0, 0.5, 1, 4, 7.5]),
    width=st.sampled_from([0.0, 0.5, 3, 100, math.inf]),
    minimum=st.integers(0, 12),
)
def test_lognormal_draws_are_numpy_s_clipped_then_rounded(
    seed: int, median: float, sigma: float, low: float, width: float, minimum: int
) -> None:
    """Counts are min(high, max(low, x)) rounded half to even, at least `minimum`, and values
    the clipped draws, for numpy's lognormal draws x (bounds as ints and floats, a bound the
    minimum lies above, an unbounded top)."""
    distribution = LogNormal(median=median, sigma=sigma, low=low, high=low + width)
    drawn = np.random.default_rng(seed).lognormal(math.log(median), sigma, 40).tolist()
    high = low + width
    expected_counts = [max(minimum, round(min(high, max(low, value)))) for value in drawn]
    rng = np.random.default_rng(seed)
    assert distribution.sample_counts(rng, 40, minimum) == expected_counts
    rng = np.random.default_rng(seed)
    assert distribution.samples(rng, 40) == [min(high, max(low, value)) for value in drawn]
