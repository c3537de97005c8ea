"""Distributions for lengths (token counts) and durations, sampled from a numpy Generator."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workloads.errors import WorkloadError
from workloads.validation import require_number


@dataclass(slots=True, frozen=True)
class Fixed:
    """Always `value`."""

    value: float

    def __post_init__(self) -> None:
        require_number("Fixed", "value", self.value, 0.0)

    def sample(self, rng: np.random.Generator) -> float:
        """One draw (consumes no randomness)."""
        return float(self.value)

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """`value` rounded, at least `minimum`."""
        return max(minimum, round(self.value))


@dataclass(slots=True, frozen=True)
class Uniform:
    """Uniform on [low, high]; counts are uniform over the integers in that range."""

    low: float
    high: float

    def __post_init__(self) -> None:
        require_number("Uniform", "low", self.low, 0.0)
        require_number("Uniform", "high", self.high, 0.0)
        if self.high < self.low:
            raise WorkloadError(
                f"Uniform.high: {self.high!r} is not allowed; use a number >= low ({self.low!r})"
            )
        if math.ceil(self.low) > math.floor(self.high):
            raise WorkloadError(
                f"Uniform: [{self.low!r}, {self.high!r}] holds no integer; widen the range"
            )

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        return float(rng.uniform(self.low, self.high))

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """A uniform integer in [ceil(low), floor(high)], at least `minimum`."""
        drawn = int(rng.integers(math.ceil(self.low), math.floor(self.high) + 1))
        return max(minimum, drawn)


@dataclass(slots=True, frozen=True)
class LogNormal:
    """exp(Normal(ln median, sigma)), clipped to [low, high]."""

    median: float
    sigma: float
    low: float = 0.0
    high: float = math.inf

    def __post_init__(self) -> None:
        require_number("LogNormal", "median", self.median, 0.0, exclusive=True)
        require_number("LogNormal", "sigma", self.sigma, 0.0)
        require_number("LogNormal", "low", self.low, 0.0)
        high_is_number = isinstance(self.high, int | float) and not isinstance(self.high, bool)
        if not high_is_number or math.isnan(self.high) or self.high < self.low:
            raise WorkloadError(
                f"LogNormal.high: {self.high!r} is not allowed; use a number >= low ({self.low!r})"
            )

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        drawn = float(rng.lognormal(math.log(self.median), self.sigma))
        return min(self.high, max(self.low, drawn))

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """One draw rounded to an int, at least `minimum`."""
        return max(minimum, round(self.sample(rng)))


@dataclass(slots=True, frozen=True)
class Exponential:
    """Exponential with the given mean."""

    mean: float

    def __post_init__(self) -> None:
        require_number("Exponential", "mean", self.mean, 0.0, exclusive=True)

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        return float(rng.exponential(self.mean))

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """One draw rounded to an int, at least `minimum`."""
        return max(minimum, round(self.sample(rng)))


Distribution = Fixed | Uniform | LogNormal | Exponential
