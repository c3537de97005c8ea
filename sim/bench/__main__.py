"""`python -m sim.bench [NAME ...]` (`make bench`): run the registered benchmarks, print a table
of their figures and whether each Done-when target is met."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from sim.bench import Benchmark, Figures
from sim.bench.cache_bench import run_cache_benchmark
from sim.bench.dynamo_bench import run_dynamo_benchmark
from sim.bench.engine_bench import run_engine_benchmark
from sim.bench.replay_bench import run_replay_benchmark
from sim.bench.sweep_bench import run_sweep_benchmark
from sim.bench.targets import target_lines

BENCHMARKS: dict[str, Benchmark] = {
    "cache": run_cache_benchmark,
    "engine": run_engine_benchmark,
    "replay": run_replay_benchmark,
    "sweep": run_sweep_benchmark,
    "dynamo": run_dynamo_benchmark,
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
    table.add_column("unit")
    for name, figures in results.items():
        for figure_name, figure in figures.items():
            table.add_row(name, figure_name, format_figure(figure.value), figure.unit)
    console.print(table)
    for line in target_lines(results, format_figure):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
