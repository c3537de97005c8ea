"""Trace replay scaling: wall time and peak memory at 10k, 100k and 1M requests.

One synthetic Mooncake-format trace (sim.bench.synthetic_trace) of the largest size is written
once; each replay reads its first n requests in a fresh process (sim.bench.replay_child), so
each peak is that replay's own. The engine path (Llama-3.1-8B, H100 profile, block 16, events
off, every result file written) runs at the smaller sizes; the cache-only path, on the same
pool, runs at every size up to 1M. The growth exponent is the least-squares slope of
log(value) against log(n): 1 is linear growth, 0 is none.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.bench import Figure, Figures
from sim.bench.replay_child import ReplayMeasurement
from sim.bench.synthetic_trace import SyntheticTraceConfig, write_synthetic_trace

MIB = 1024**2


@dataclass(slots=True, frozen=True)
class ReplayBenchConfig:
    """The trace, the deployment replaying it, and the sizes each path runs at."""

    trace: SyntheticTraceConfig = field(default_factory=SyntheticTraceConfig)
    engine_sizes: tuple[int, ...] = (10_000, 100_000)
    cache_only_sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    model: str = "llama-3.1-8b"
    gpu: str = "h100"
    cost_model: str = "h100/llama-3.1-8b/tp1"
    block_size: int = 16


def trace_scenario_data(
    config: ReplayBenchConfig, trace_path: Path, num_requests: int
) -> dict[str, Any]:
    """The replay scenario for the first `num_requests` requests of the trace."""
    return {
        "name": "bench-trace-replay",
        "engine": {"block_size": config.block_size},
        "deployment": {"model": config.model, "gpu": config.gpu, "tp": 1},
        "cost_model": config.cost_model,
        "workload": {
            "source": {
                "kind": "trace",
                "format": "mooncake",
                "path": str(trace_path.absolute()),
                "max_requests": num_requests,
            }
        },
        "outputs": {"events": False},
    }


def run_replay_child(replay_path: str, scenario_data: dict[str, Any]) -> ReplayMeasurement:
    """Measure one replay in a fresh Python process."""
    job = json.dumps({"path": replay_path, "scenario": scenario_data})
    completed = subprocess.run(
        [sys.executable, "-m", "sim.bench.replay_child", job],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"the {replay_path} replay exited with status {completed.returncode}: "
            f"{completed.stderr.strip()[-2000:]}"
        )
    return ReplayMeasurement(**json.loads(completed.stdout.strip().splitlines()[-1]))


def growth_exponent(sizes: Sequence[int], values: Sequence[float]) -> float:
    """Least-squares slope of log(value) against log(size)."""
    slope, _intercept = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)


def size_label(num_requests: int) -> str:
    """10000 -> '10k', 1000000 -> '1M' (other counts with thousands separators)."""
    for divisor, suffix in ((1_000_000, "M"), (1_000, "k")):
        if num_requests % divisor == 0:
            return f"{num_requests // divisor}{suffix}"
    return f"{num_requests:,}"


def path_figures(
    replay_path: str, sizes: Sequence[int], measurements: Sequence[ReplayMeasurement]
) -> Figures:
    """Per-size wall time, speed, peak memory and hit rate, then the growth exponents."""
    figures: Figures = {}
    for num_requests, measurement in zip(sizes, measurements, strict=True):
        if measurement.num_requests != num_requests:
            raise RuntimeError(
                f"the {replay_path} replay of {num_requests} requests replayed "
                f"{measurement.num_requests}"
            )
        label = f"{replay_path} {size_label(num_requests)}"
        figures[f"{label} wall"] = Figure(measurement.wall_s, "s")
        figures[f"{label} speed"] = Figure(num_requests / measurement.wall_s, "req/s")
        figures[f"{label} peak RSS"] = Figure(measurement.peak_rss_bytes / MIB, "MiB")
        figures[f"{label} hit rate"] = Figure(100.0 * measurement.hit_rate, "%")
    if len(sizes) >= 2:
        figures[f"{replay_path} wall-time growth exponent"] = Figure(
            growth_exponent(sizes, [m.wall_s for m in measurements])
        )
        figures[f"{replay_path} peak-RSS growth exponent"] = Figure(
            growth_exponent(sizes, [m.peak_rss_bytes for m in measurements])
        )
    return figures


def run_replay_benchmark(config: ReplayBenchConfig | None = None) -> Figures:
    """Write the trace once, replay each size on each path in its own process, report."""
    config = config or ReplayBenchConfig()
    largest = max((*config.engine_sizes, *config.cache_only_sizes))
    figures: Figures = {}
    with tempfile.TemporaryDirectory(prefix="prefixsim-bench-") as scratch:
        trace_path = Path(scratch) / "synthetic_mooncake.jsonl"
        write_synthetic_trace(trace_path, config.trace, largest)
        for replay_path, sizes in (
            ("engine", config.engine_sizes),
            ("cache-only", config.cache_only_sizes),
        ):
            measurements = [
                run_replay_child(replay_path, trace_scenario_data(config, trace_path, size))
                for size in sizes
            ]
            figures |= path_figures(replay_path, sizes, measurements)
    return figures
