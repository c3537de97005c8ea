"""Arrival processes: Poisson, Gamma with a given CV, piecewise rates, trace timestamps."""

from __future__ import annotations

from itertools import islice

import numpy as np
import pytest

from workloads.api import (
    GammaArrivals,
    PiecewiseRateArrivals,
    PoissonArrivals,
    RatePiece,
    TraceArrivals,
    WorkloadError,
)


def _gaps(process, count: int, seed: int = 1) -> np.ndarray:
    times = list(islice(process.arrival_times(np.random.default_rng(seed)), count))
    assert times == sorted(times)
    return np.diff([process.start_at, *times])


def test_poisson_rate_and_unit_cv() -> None:
    gaps = _gaps(PoissonArrivals(rate_per_s=4.0, start_at=10.0), 20_000)
    assert 0.245 < gaps.mean() < 0.255
    assert 0.97 < gaps.std() / gaps.mean() < 1.03


@pytest.mark.parametrize("cv", [0.5, 3.0])
def test_gamma_has_the_requested_rate_and_cv(cv: float) -> None:
    gaps = _gaps(GammaArrivals(rate_per_s=2.0, cv=cv), 40_000)
    assert 0.48 < gaps.mean() < 0.52
    assert 0.94 * cv < gaps.std() / gaps.mean() < 1.06 * cv


def test_piecewise_rates_follow_the_pieces_and_repeat() -> None:
    # A two-piece "day": 100 s at 5/s, then 100 s with no traffic, repeated.
    process = PiecewiseRateArrivals((RatePiece(100.0, 5.0), RatePiece(100.0, 0.0)))
    times = np.array(list(islice(process.arrival_times(np.random.default_rng(2)), 3000)))
    phase = times % 200.0
    assert np.all(phase < 100.0)  # nothing in the idle half
    per_cycle = np.bincount((times // 200.0).astype(int))[:5]
    assert all(440 < count < 560 for count in per_cycle)


def test_piecewise_without_repeat_stops_at_the_end() -> None:
    process = PiecewiseRateArrivals((RatePiece(5.0, 1.0), RatePiece(5.0, 20.0)), repeat=False)
    times = list(process.arrival_times(np.random.default_rng(3)))
    assert max(times) < 10.0 and 70 < len(times) < 140
    assert sum(t < 5.0 for t in times) < 15


def test_trace_arrivals_replay_timestamps(traces_dir) -> None:
    mooncake = TraceArrivals(
        str(traces_dir / "mooncake/arxiv_mooncake_trace_first1000.jsonl"), "mooncake"
    )
    times = list(mooncake.arrival_times(np.random.default_rng(0)))
    assert len(times) == 1000 and times[0] == 0.0 and times[-1] == 177.098
    azure = TraceArrivals(
        str(traces_dir / "azure-llm-2023/AzureLLMInferenceTrace_conv.csv"), "azure", speedup=2.0
    )
    times = list(azure.arrival_times(np.random.default_rng(0)))
    assert len(times) == 19_366 and times[0] == 0.0
    assert times[-1] == pytest.approx(3501.721937 / 2.0)
    dynamo = TraceArrivals(str(traces_dir / "dynamo-pi-agent/pi_request_trace.jsonl"), "dynamo")
    times = list(dynamo.arrival_times(np.random.default_rng(0)))
    assert len(times) == 17 and times[:2] == [0.0, 31.191]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: PoissonArrivals(0.0),
            r"PoissonArrivals.rate_per_s: 0.0 is not allowed; use a finite number > 0.0",
        ),
        (lambda: GammaArrivals(1.0, cv=-2), r"GammaArrivals.cv: -2 is not allowed"),
        (lambda: PiecewiseRateArrivals(()), r"PiecewiseRateArrivals.pieces: empty"),
        (lambda: PiecewiseRateArrivals((RatePiece(1.0, 0.0),)), r"every rate is 0"),
        (lambda: RatePiece(0.0, 1.0), r"RatePiece.duration_s: 0.0 is not allowed"),
        (
            lambda: TraceArrivals("x", "sharegpt"),
            r"TraceArrivals.trace_format: 'sharegpt' is not allowed; allowed: mooncake, dynamo",
        ),
    ],
)
def test_invalid_arrival_settings_name_the_field(make, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        make()
