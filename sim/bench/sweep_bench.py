"""Sweep throughput: the same small sweep on the local backend with one worker, then two.

The sweep crosses two block sizes with four seeds (8 runs) over a short chat scenario on the
H100 profile; each run takes well under a wall second. Each worker count starts from an empty
results directory, so every run executes; all runs must succeed.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sim.bench import Figure, Figures
from sim.sweep import SweepPlan, load_sweep, run_sweep


@dataclass(slots=True, frozen=True)
class SweepBenchConfig:
    """The sweep's runs and the worker counts compared."""

    block_sizes: tuple[int, ...] = (16, 32)
    seeds: tuple[int, ...] = (1, 2, 3, 4)
    duration_s: float = 120.0
    sessions_per_s: float = 2.0
    worker_counts: tuple[int, int] = (1, 2)


def sweep_yaml(config: SweepBenchConfig) -> str:
    """The sweep file: a chat scenario and its grid of block sizes and seeds."""
    block_sizes = ", ".join(map(str, config.block_sizes))
    seeds = ", ".join(map(str, config.seeds))
    return (
        "name: bench-sweep\n"
        f"duration_s: {config.duration_s}\n"
        "cost_model: h100/llama-3.1-8b/tp1\n"
        "workload:\n"
        "  source: {kind: chat}\n"
        f"  arrivals: {{process: poisson, rate_per_s: {config.sessions_per_s}}}\n"
        "outputs: {events: false}\n"
        "sweep:\n"
        f"  grid: {{engine.block_size: [{block_sizes}]}}\n"
        f"  seeds: [{seeds}]\n"
    )


def timed_sweep(plan: SweepPlan, results_root: Path, num_workers: int) -> float:
    """Run every run of `plan` into `results_root`; returns wall seconds."""
    started_at = time.perf_counter()
    result = run_sweep(plan, results_root=results_root, num_workers=num_workers, progress=False)
    wall_s = time.perf_counter() - started_at
    if result.failed_run_ids or result.num_already_done:
        raise RuntimeError(
            f"the benchmark sweep with -j {num_workers} did not run every run cleanly: "
            f"{len(result.failed_run_ids)} failed, {result.num_already_done} already done"
        )
    return wall_s


def run_sweep_benchmark(config: SweepBenchConfig | None = None) -> Figures:
    """Run the sweep at each worker count; report runs per wall second and the speedup."""
    config = config or SweepBenchConfig()
    figures: Figures = {}
    runs_per_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="prefixsim-bench-") as scratch:
        sweep_path = Path(scratch) / "sweep.yaml"
        sweep_path.write_text(sweep_yaml(config), encoding="utf-8")
        plan = load_sweep(sweep_path)
        figures["runs"] = Figure(len(plan.runs))
        for num_workers in config.worker_counts:
            wall_s = timed_sweep(plan, Path(scratch) / f"results-j{num_workers}", num_workers)
            runs_per_s.append(len(plan.runs) / wall_s)
            figures[f"-j {num_workers} wall"] = Figure(wall_s, "s")
            figures[f"-j {num_workers} throughput"] = Figure(runs_per_s[-1], "runs/s")
    fewer, more = config.worker_counts
    figures[f"-j {more} / -j {fewer} throughput"] = Figure(runs_per_s[1] / runs_per_s[0], "x")
    return figures
