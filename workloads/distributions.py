"""Distributions for lengths (token counts) and durations, sampled from a numpy Generator."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

# Loaded with this module, not by numpy at a run's first draw: that draw comes once the run's
# output is open, and a signal landing inside numpy.random's extension-module import is lost
# (a Ctrl-C or SIGTERM that never stopped the run; its stack, logged, ended in that import).
import numpy.random  # noqa: F401

from workloads.errors import WorkloadError
from workloads.validation import require_number


class _Draws(ABC):
    """Draws one at a time or `size` at once: numpy's n single draws and one draw of size n
    consume the random stream alike, so both give the same values. Draws come back as Python
    lists: the few a session takes are shaped (clipped, rounded) faster so than in numpy."""

    __slots__ = ()

    @abstractmethod
    def samples(self, rng: np.random.Generator, size: int) -> list[float]:
        """`size` draws."""

    @abstractmethod
    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> list[int]:
        """`size` draws as counts, each at least `minimum`."""

    def sample(self, rng: np.random.Generator) -> float:
        """One draw."""
        return self.samples(rng, 1)[0]

    def sample_count(self, rng: np.random.Generator, minimum: int = 0) -> int:
        """One count, at least `minimum`."""
        return self.sample_counts(rng, 1, minimum)[0]


@dataclass(slots=True, frozen=True)
class Fixed(_Draws):
    """Always `value`."""

    value: float

    def __post_init__(self) -> None:
        require_number("Fixed", "value", self.value, 0.0)

    def samples(self, rng: np.random.Generator, size: int) -> list[float]:
        """`size` draws (consuming no randomness)."""
        return [float(self.value)] * size

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> list[int]:
        """`size` times `value` rounded, at least `minimum`."""
        return [max(minimum, round(self.value))] * size


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

    def samples(self, rng: np.random.Generator, size: int) -> list[float]:
        """`size` draws."""
        drawn: list[float] = rng.uniform(self.low, self.high, size).tolist()
        return drawn

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> list[int]:
        """`size` uniform integers in [ceil(low), floor(high)], each at least `minimum`."""
        low, high = math.ceil(self.low), math.floor(self.high) + 1
        # One integer without `size` skips numpy's shape handling, most of the call's cost.
        drawn = (
            [int(rng.integers(low, high))] if size == 1 else rng.integers(low, high, size).tolist()
        )
        return [max(minimum, count) for count in drawn]


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

    def samples(self, rng: np.random.Generator, size: int) -> list[float]:
        """`size` draws."""
        low, high = self.low, self.high
        # min(high, max(low, value)) without the calls (low <= high), as in sample_counts.
        return [
            high if value > high else low if value < low else value
            for value in self._unclipped(rng, size)
        ]

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> list[int]:
        """`size` draws rounded to ints, each at least `minimum`."""
        low, high = self.low, self.high
        counts = [
            round(high if value > high else low if value < low else value)
            for value in self._unclipped(rng, size)
        ]
        # Rounding keeps order, so no count is below round(low).
        return counts if round(low) >= minimum else [max(minimum, count) for count in counts]

    def _unclipped(self, rng: np.random.Generator, size: int) -> list[float]:
        drawn: list[float] = rng.lognormal(math.log(self.median), self.sigma, size).tolist()
        return drawn


@dataclass(slots=True, frozen=True)
class Exponential(_Draws):
    """Exponential with the given mean."""

    mean: float

    def __post_init__(self) -> None:
        require_number("Exponential", "mean", self.mean, 0.0, exclusive=True)

    def samples(self, rng: np.random.Generator, size: int) -> list[float]:
        """`size` draws."""
        drawn: list[float] = rng.exponential(self.mean, size).tolist()
        return drawn

    def sample_counts(self, rng: np.random.Generator, size: int, minimum: int = 0) -> list[int]:
        """`size` draws rounded to ints, each at least `minimum`."""
        return [max(minimum, round(value)) for value in self.samples(rng, size)]


Distribution = Fixed | Uniform | LogNormal | Exponential
