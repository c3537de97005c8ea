"""`python -m sim.bench [NAME ...]` (`make bench`): run the registered benchmarks, print a table."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from sim.bench import Benchmark, Figures
from sim.bench.cache_bench import run_cache_benchmark

# New benchmarks (engine speed, trace replay memory, sweep throughput) register here.
BENCHMARKS: dict[str, Benchmark] = {
    "cache": run_cache_benchmark,
}


def format_figure(value: float | int) -> str:
    """Thousands separators for integers and floats >= 1000; four significant digits below."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def main(names: list[str]) -> int:
    """Run the named benchmarks (all when none are named) and print their figures."""
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        print(
            f"error: unknown benchmark {unknown[0]!r}; known: {', '.join(BENCHMARKS)}",
            file=sys.stderr,
        )
        return 2
    console = Console()
    results: dict[str, Figures] = {}
    for name in names or list(BENCHMARKS):
        with console.status(f"running {name} benchmark"):
            results[name] = BENCHMARKS[name]()
    table = Table(title="prefixsim benchmarks")
    table.add_column("benchmark")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, figures in results.items():
        for figure, value in figures.items():
            table.add_row(name, figure, format_figure(value))
    console.print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
