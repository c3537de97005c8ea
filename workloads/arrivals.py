"""Arrival processes: Poisson, Gamma (given coefficient of variation), piecewise rates, traces.

Each process yields non-decreasing arrival times in seconds from a numpy Generator that belongs
to the workload alone, so engine settings never change the arrivals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from workloads.errors import WorkloadError
from workloads.traces.replay import get_trace_format
from workloads.validation import require_number

_BATCH = 1024


@dataclass(slots=True, frozen=True)
class PoissonArrivals:
    """Exponential gaps with mean 1 / rate_per_s, starting after `start_at`."""

    rate_per_s: float
    start_at: float = 0.0

    def __post_init__(self) -> None:
        require_number("PoissonArrivals", "rate_per_s", self.rate_per_s, 0.0, exclusive=True)
        require_number("PoissonArrivals", "start_at", self.start_at, 0.0)

    def arrival_times(self, rng: np.random.Generator) -> Iterator[float]:
        """An endless stream of arrival times."""
        return _accumulate(self.start_at, lambda: rng.exponential(1.0 / self.rate_per_s, _BATCH))


@dataclass(slots=True, frozen=True)
class GammaArrivals:
    """Gamma gaps with mean 1 / rate_per_s and coefficient of variation `cv` (1 is Poisson)."""

    rate_per_s: float
    cv: float
    start_at: float = 0.0

    def __post_init__(self) -> None:
        require_number("GammaArrivals", "rate_per_s", self.rate_per_s, 0.0, exclusive=True)
        require_number("GammaArrivals", "cv", self.cv, 0.0, exclusive=True)
        require_number("GammaArrivals", "start_at", self.start_at, 0.0)

    def arrival_times(self, rng: np.random.Generator) -> Iterator[float]:
        """An endless stream of arrival times."""
        shape = 1.0 / (self.cv * self.cv)
        scale = 1.0 / (self.rate_per_s * shape)
        return _accumulate(self.start_at, lambda: rng.gamma(shape, scale, _BATCH))


@dataclass(slots=True, frozen=True)
class RatePiece:
    """A stretch of `duration_s` seconds with a constant arrival rate."""

    duration_s: float
    rate_per_s: float

    def __post_init__(self) -> None:
        require_number("RatePiece", "duration_s", self.duration_s, 0.0, exclusive=True)
        require_number("RatePiece", "rate_per_s", self.rate_per_s, 0.0)


@dataclass(slots=True, frozen=True)
class PiecewiseRateArrivals:
    """A Poisson process whose rate is constant within each piece (e.g. 24 hourly diurnal rates).

    With `repeat` the pieces cycle for ever; otherwise arrivals stop at the end of the last one.
    """

    pieces: tuple[RatePiece, ...]
    repeat: bool = True
    start_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.pieces:
            raise WorkloadError("PiecewiseRateArrivals.pieces: empty; give at least one RatePiece")
        if all(piece.rate_per_s == 0 for piece in self.pieces):
            raise WorkloadError(
                "PiecewiseRateArrivals.pieces: every rate is 0; at least one must be > 0"
            )
        require_number("PiecewiseRateArrivals", "start_at", self.start_at, 0.0)

    def arrival_times(self, rng: np.random.Generator) -> Iterator[float]:
        """Arrival times by time rescaling: unit-rate exponential work spent at the piece rates."""
        now = self.start_at
        index = 0
        left_in_piece = self.pieces[0].duration_s
        while True:
            for work in rng.exponential(1.0, _BATCH).tolist():
                while True:
                    rate = self.pieces[index].rate_per_s
                    if rate > 0 and rate * left_in_piece >= work:
                        step = work / rate
                        now += step
                        left_in_piece -= step
                        yield now
                        break
                    work -= rate * left_in_piece
                    now += left_in_piece
                    index += 1
                    if index == len(self.pieces):
                        if not self.repeat:
                            return
                        index = 0
                    left_in_piece = self.pieces[index].duration_s


@dataclass(slots=True, frozen=True)
class TraceArrivals:
    """The arrival times of a trace file (seconds from its start), divided by `speedup`."""

    path: str
    trace_format: str
    speedup: float = 1.0

    def __post_init__(self) -> None:
        get_trace_format("TraceArrivals", self.trace_format)
        require_number("TraceArrivals", "speedup", self.speedup, 0.0, exclusive=True)

    def arrival_times(self, rng: np.random.Generator) -> Iterator[float]:
        """The trace's arrivals in order (`rng` is unused: a trace is not random)."""
        times = get_trace_format("TraceArrivals", self.trace_format).arrival_times_s(self.path)
        return (time / self.speedup for time in times)


ArrivalProcess = PoissonArrivals | GammaArrivals | PiecewiseRateArrivals | TraceArrivals


def _accumulate(start_at: float, draw_gaps: Callable[[], np.ndarray]) -> Iterator[float]:
    now = start_at
    while True:
        for gap in draw_gaps().tolist():
            now += gap
            yield now
