"""Speed benchmarks (`make bench`): each module offers a callable returning named figures."""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Figure:
    """One measured number or count and its unit ("" for counts and ratios)."""

    value: float | int
    unit: str = ""


Figures = dict[str, Figure]
Benchmark = Callable[[], Figures]
