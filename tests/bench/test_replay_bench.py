"""The replay scaling benchmark: sizes, paths, exponents (counts only; no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.bench.replay_bench import (
    MIB,
    ReplayBenchConfig,
    growth_exponent,
    path_figures,
    run_replay_benchmark,
    run_replay_child,
    size_label,
    trace_scenario_data,
)
from sim.bench.replay_child import ReplayMeasurement, measure_replay
from sim.bench.synthetic_trace import SyntheticTraceConfig, write_synthetic_trace
from sim.config import Scenario

# Benchmarks in child processes: make test-all.
pytestmark = pytest.mark.slow

SMALL = ReplayBenchConfig(
    trace=SyntheticTraceConfig(seed=5), engine_sizes=(100,), cache_only_sizes=(100, 300)
)


def test_growth_exponent_is_the_log_log_slope():
    assert growth_exponent([10, 100, 1000], [2.0, 20.0, 200.0]) == pytest.approx(1.0)
    assert growth_exponent([10, 100, 1000], [5.0, 5.0, 5.0]) == pytest.approx(0.0)
    assert growth_exponent([1_000, 4_000], [3.0, 48.0]) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("num_requests", "label"),
    [(10_000, "10k"), (100_000, "100k"), (1_000_000, "1M"), (2_500, "2,500"), (300, "300")],
)
def test_size_labels(num_requests, label):
    assert size_label(num_requests) == label


def test_scenario_replays_the_first_n_requests_of_the_trace(tmp_path: Path):
    """Llama-3.1-8B on the H100 profile, block 16, no events, the trace's first 300 requests."""
    (tmp_path / "t.jsonl").write_text("")
    scenario = Scenario.model_validate(
        trace_scenario_data(ReplayBenchConfig(), tmp_path / "t.jsonl", 300)
    )
    assert scenario.cost_model == "h100/llama-3.1-8b/tp1"
    assert scenario.engine.block_size == 16
    assert scenario.outputs.events is False
    assert scenario.workload.source.max_requests == 300
    assert scenario.workload.source.path == str((tmp_path / "t.jsonl").absolute())


def test_both_paths_replay_the_same_requests_in_process(tmp_path: Path):
    """Seed 5, first 100 requests: both paths replay 100 and hit 55.83 % of prompt tokens (the
    engine's pool is large and the requests barely overlap, so it hits what replaying each
    alone does)."""
    trace_path = tmp_path / "trace.jsonl"
    write_synthetic_trace(trace_path, SMALL.trace, 100)
    data = trace_scenario_data(SMALL, trace_path, 100)
    engine = measure_replay("engine", data)
    cache_only = measure_replay("cache-only", data)
    assert (engine.num_requests, cache_only.num_requests) == (100, 100)
    assert engine.hit_rate == pytest.approx(0.558288054)
    assert cache_only.hit_rate == pytest.approx(0.558288054)
    assert engine.peak_rss_bytes > 0
    with pytest.raises(ValueError, match="replay path 'gpu' is not one of engine, cache-only"):
        measure_replay("gpu", data)


def test_benchmark_runs_each_size_in_a_child_and_reports_exponents():
    figures = run_replay_benchmark(SMALL)
    per_size = ("wall", "speed", "peak RSS", "hit rate")
    expected_names = [f"engine 100 {name}" for name in per_size]
    expected_names += [f"cache-only {n} {name}" for n in (100, 300) for name in per_size]
    expected_names += [
        "cache-only wall-time growth exponent",
        "cache-only peak-RSS growth exponent",
    ]
    assert list(figures) == expected_names
    assert figures["cache-only 300 peak RSS"].unit == "MiB"
    assert figures["engine 100 hit rate"].value == pytest.approx(55.8288054)
    assert figures["cache-only 300 hit rate"].value == pytest.approx(63.74385199)


def test_a_replay_that_comes_up_short_is_an_error():
    short = ReplayMeasurement(num_requests=99, hit_rate=0.5, wall_s=1.0, peak_rss_bytes=1)
    with pytest.raises(RuntimeError, match="the engine replay of 100 requests replayed 99"):
        path_figures("engine", [100], [short])


def test_child_peak_memory_is_its_own_not_the_parents(tmp_path: Path):
    """A replay child started while this process holds 400 MiB reports its own, smaller peak
    (Linux's ru_maxrss would report at least the parent's footprint)."""
    trace_path = tmp_path / "trace.jsonl"
    write_synthetic_trace(trace_path, SMALL.trace, 100)
    ballast = b"\x01" * (400 * MIB)
    measurement = run_replay_child("cache-only", trace_scenario_data(SMALL, trace_path, 100))
    assert len(ballast) == 400 * MIB
    assert 0 < measurement.peak_rss_bytes < 400 * MIB
