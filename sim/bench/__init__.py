"""Speed benchmarks (`make bench`): each module offers a callable returning named figures."""

from collections.abc import Callable

Figures = dict[str, float | int]
Benchmark = Callable[[], Figures]
