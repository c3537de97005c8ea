"""The steady-state test: trends of binned series, the queue integral, and the verdict.

The slow test checks the runs of the shipped arrival-rate study that used to look healthy: with
the 30 s warm-up it had, 10 sessions/s on one H100 is unstable whatever the length of the run
(120, 180 or 300 s of arrivals): over 120 s the sessions are still accumulating (the request
rate grows by about half over the window), over 180 and 300 s the waiting queue grows.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sim.metrics.stability import (
    Stability,
    assess_stability,
    binned_means,
    binned_queue,
    trend,
)
from sim.runner import run_scenario
from sim.sweep import load_sweep

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"


def test_a_flat_series_does_not_grow_and_a_ramp_grows_twice_its_mean() -> None:
    flat = trend(np.array([5.0, 5.0, 5.0, 5.0]), floor=1.0)
    assert flat.mean == 5.0
    assert flat.growth == pytest.approx(0.0, abs=1e-12)
    # 0, 1, ..., 9: slope 1 per bin, growth 10 over the window, mean 4.5: 10 / 4.5.
    ramp = trend(np.arange(10.0), floor=1.0)
    assert ramp.mean == 4.5
    assert ramp.growth == pytest.approx(10 / 4.5)
    assert ramp.t_statistic > 1e12  # a perfect line leaves (almost) no residual


def test_trend_uses_the_floor_and_skips_empty_bins() -> None:
    series = trend(np.array([0.1, np.nan, 0.3]), floor=0.5)
    assert math.isnan(series.growth)  # fewer than three bins with values
    # 0.1, 0.2, 0.1, 0.2: slope 0.02 per bin, so 0.08 over 4 bins, over the floor 0.5 (mean
    # 0.15); residuals -0.02, 0.06, -0.06, 0.02 give a standard error of sqrt(0.008 / 2 / 5).
    noisy = trend(np.array([0.1, 0.2, 0.1, 0.2]), floor=0.5)
    assert noisy.growth == pytest.approx(0.16)
    assert noisy.t_statistic == pytest.approx(0.02 / math.sqrt(0.008 / 2 / 5))


def test_binned_queue_spreads_each_second_evenly() -> None:
    # 1, 2, 3, 4 request-seconds of waiting in seconds 0..3.
    assert binned_queue([1, 2, 3, 4], 0.0, 4.0, 2).tolist() == [1.5, 3.5]
    assert binned_queue([1, 2, 3, 4], 0.5, 2.5, 2).tolist() == [1.5, 2.5]
    assert binned_queue([], 30.0, 120.0, 3).tolist() == [0.0, 0.0, 0.0]


def test_binned_means_leave_empty_bins_nan() -> None:
    means = binned_means(np.array([0.5, 1.5, 1.6, 9.0]), np.array([1.0, 2.0, 4.0, 9.0]), 0, 4, 4)
    assert means[:2].tolist() == [1.0, 3.0]
    assert np.isnan(means[2:]).all()


def test_a_growing_backlog_is_unstable_and_a_steady_one_is_not() -> None:
    # 100 s window, one request per second; waiting requests grow 0.5 per second (a backlog)
    # or hover at 3 (a busy but steady queue); TTFT follows the queue.
    arrivals = np.arange(0.0, 100.0)
    growing = assess_stability(
        arrivals_s=arrivals,
        ttfts_s=0.1 + arrivals * 0.05,
        waiting_time_per_second=list(arrivals * 0.5),
        window_start_s=0.0,
        window_end_s=100.0,
        end_at=130.0,
    )
    assert not growing.stable
    # Ten 10 s bins average 2.25, 7.25, ..., 47.25 waiting requests: slope 5 per bin, growth
    # 50 over a mean of 24.75.
    assert growing.queue_mean == pytest.approx(24.75)
    assert growing.queue_growth == pytest.approx(50 / 24.75)
    assert growing.reason.startswith("the waiting queue grew by 202% of its mean (24.8 requests)")
    assert "TTFT grew by" in growing.reason
    assert (growing.drain_s, growing.drain_fraction) == (30.0, 0.3)
    steady = assess_stability(
        arrivals_s=arrivals,
        ttfts_s=np.full(100, 0.2),
        waiting_time_per_second=[3.0, 2.0, 4.0, 3.0] * 25,
        window_start_s=0.0,
        window_end_s=100.0,
        end_at=101.0,
    )
    assert steady.stable and steady.reason is None
    assert steady.queue_mean == 3.0


def test_an_arrival_rate_still_ramping_is_no_steady_state() -> None:
    # Arrivals thicken over the window: 1/s in its first half, 3/s in its second.
    arrivals = np.concatenate((np.arange(0.0, 50.0), np.arange(50.0, 100.0, 1 / 3)))
    ramping = assess_stability(
        arrivals_s=arrivals,
        ttfts_s=np.full(len(arrivals), 0.05),
        waiting_time_per_second=[],
        window_start_s=0.0,
        window_end_s=100.0,
        end_at=100.0,
    )
    assert not ramping.stable
    assert ramping.reason.startswith("no steady load: the request rate grew by")


def test_too_few_requests_get_no_verdict_of_steadiness() -> None:
    """14 requests over a 1 s window with a 5 s drain (a 61 s run after a 60 s warm-up): no
    trend is significant, but 1.4 requests a bin say nothing of a steady state; 20 do."""

    def verdict(num_requests: int) -> Stability:
        return assess_stability(
            arrivals_s=np.linspace(60.0, 61.0, num_requests, endpoint=False),
            ttfts_s=np.full(num_requests, 0.05),
            waiting_time_per_second=[],
            window_start_s=60.0,
            window_end_s=61.0,
            end_at=66.35,
        )

    few = verdict(14)
    assert not few.stable
    assert few.reason == (
        "too few requests measured to judge a steady state (14; at least 20: a longer duration_s, "
        "or more of the trace)"
    )
    assert verdict(20).stable


@pytest.mark.slow
@pytest.mark.parametrize("duration_s", [120, 180, 300])
def test_ten_sessions_per_second_is_unstable_at_every_duration(duration_s: int, tmp_path) -> None:
    overrides = [f"duration_s={duration_s}", "warmup_s=30"]
    plan = load_sweep(SCENARIOS_DIR / "arrival_rate.yaml", overrides)
    runs = [run for run in plan.runs if dict(run.parameters)["workload.arrivals.rate_per_s"] == 10]
    assert [run.seed for run in runs] == [1, 2]
    for run in runs:
        summary = run_scenario(run.scenario, plan.base_dir, run_dir=tmp_path / run.run_id).summary
        assert summary["stable"] is False, (run.seed, summary)
        expected = "no steady load" if duration_s == 120 else "the waiting queue grew by"
        assert expected in summary["unstable_reason"]
