"""The sweep throughput benchmark (counts only; no timing asserted)."""

from __future__ import annotations

import pytest
import yaml

from sim.bench.sweep_bench import SweepBenchConfig, run_sweep_benchmark, sweep_yaml


def test_default_sweep_is_eight_chat_runs():
    """Block sizes 16 and 32 crossed with seeds 1-4: 8 runs of 120 s of chat."""
    data = yaml.safe_load(sweep_yaml(SweepBenchConfig()))
    assert data["sweep"] == {"grid": {"engine.block_size": [16, 32]}, "seeds": [1, 2, 3, 4]}
    assert data["duration_s"] == 120.0
    assert data["workload"]["arrivals"] == {"process": "poisson", "rate_per_s": 2.0}


@pytest.mark.slow
def test_two_runs_at_one_and_two_workers():
    figures = run_sweep_benchmark(
        SweepBenchConfig(block_sizes=(16,), seeds=(1, 2), duration_s=5.0, sessions_per_s=1.0)
    )
    assert {name: figure.unit for name, figure in figures.items()} == {
        "runs": "",
        "-j 1 wall": "s",
        "-j 1 throughput": "runs/s",
        "-j 2 wall": "s",
        "-j 2 throughput": "runs/s",
        "-j 2 / -j 1 throughput": "x",
    }
    assert figures["runs"].value == 2
