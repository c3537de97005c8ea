"""Distributions for lengths (token counts) and durations, sampled from a numpy Generator."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from workloads.errors import WorkloadError
from workloads.validation import require_number

# Draws of one call: `size` floats, or `size` token counts and the like.
FloatArray: TypeAlias = npt.NDArray[np.float64]
CountArray: TypeAlias = npt.NDArray[np.int64]


class _Draws(ABC):
    """One draw as one element of a vector of draws: n single draws and one call of size n
    consume the random stream alike, so the two give the same values."""

    __slots__ = ()

    @abstractmethod
    def samples(self, rng: np.random.Generator, size: int) -> FloatArray:
        """`size` draws."""

    @abstractmethod
    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> CountArray:
        """`size` draws as counts, each at least `minimum`."""

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        return float(self.samples(rng, 1)[0])

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """One count, at least `minimum`."""
        return int(self.sample_counts(rng, 1, minimum)[0])


@dataclass(slots=True, frozen=True)
class Fixed(_Draws):
    """Always `value`."""

    value: float

    def __post_init__(self) -> None:
        require_number("Fixed", "value", self.value, 0.0)

    def samples(self, rng: np.random.Generator, size: int) -> FloatArray:
        """`size` draws (consuming no randomness)."""
        return np.full(size, float(self.value))

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> CountArray:
        """`size` times `value` rounded, at least `minimum`."""
        return np.full(size, max(minimum, round(self.value)), dtype=np.int64)


@dataclass(slots=True, frozen=True)
class Uniform(_Draws):
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

    def samples(self, rng: np.random.Generator, size: int) -> FloatArray:
        """`size` draws."""
        return rng.uniform(self.low, self.high, size)

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> CountArray:
        """`size` uniform integers in [ceil(low), floor(high)], each at least `minimum`."""
        drawn = rng.integers(math.ceil(self.low), math.floor(self.high) + 1, size)
        return np.maximum(drawn, minimum)


@dataclass(slots=True, frozen=True)
class LogNormal(_Draws):
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

    def samples(self, rng: np.random.Generator, size: int) -> FloatArray:
        """`size` draws."""
        drawn = rng.lognormal(math.log(self.median), self.sigma, size)
        return np.minimum(np.maximum(drawn, self.low), self.high)

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> CountArray:
        """`size` draws rounded to ints (half to even), each at least `minimum`."""
        return _counts(self.samples(rng, size), minimum)


@dataclass(slots=True, frozen=True)
class Exponential(_Draws):
    """Exponential with the given mean."""

    mean: float

    def __post_init__(self) -> None:
        require_number("Exponential", "mean", self.mean, 0.0, exclusive=True)

    def samples(self, rng: np.random.Generator, size: int) -> FloatArray:
        """`size` draws."""
        return rng.exponential(self.mean, size)

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> CountArray:
        """`size` draws rounded to ints (half to even), each at least `minimum`."""
        return _counts(self.samples(rng, size), minimum)


Distribution = Fixed | Uniform | LogNormal | Exponential


def _counts(draws: FloatArray, minimum: int) -> CountArray:
    """Draws rounded half to even, as Python's round does, and raised to `minimum`."""
    return np.maximum(np.rint(draws).astype(np.int64), minimum)
