"""Did a run reach a steady state? Trend tests on the measured window, and the drain time.

A deployment that keeps up with its arrivals has a waiting queue and TTFT that fluctuate around
a level; an overloaded one has a backlog growing for as long as arrivals last, so both trend
upward and the queue takes a time proportional to the run to drain once arrivals stop.

The measured window [warmup_s, arrivals_end_s] is cut into `NUM_TREND_BINS` equal bins. Two
series are formed: the time-averaged number of waiting requests (all replicas together, from
each step's queue length times its duration) and the mean TTFT of the requests arriving in each
bin. For each, the least-squares slope against the bin centres, times the window length, is the
growth over the window; divided by the series' mean (never less than a floor, so that noise on a
near-empty queue or on millisecond TTFTs is not read as growth) it is the *relative growth*. A
steady series has a relative growth near 0; a backlog growing linearly from empty has 2 (it
ends at twice its mean). A run is unstable when

- the request rate's, the queue's or the TTFT's relative growth exceeds `MAX_RELATIVE_GROWTH`
  with a slope t statistic above `MIN_T_STATISTIC` (a rate still growing means sessions are still
  accumulating: the window holds no steady load yet), or
- or nothing was measured, or too few requests to judge (fewer than `MIN_REQUESTS_PER_BIN` per
  bin on average: the trend tests have no power, and so short a window says nothing of a
  steady state).

The drain time after arrivals stop is reported as evidence (`drain_s`, and `drain_fraction` of
the window) but does not decide: a deployment that keeps up still needs the running time of its
longest requests to drain, and a preempted request's running time can be as long as an
overloaded run's backlog, so no fixed share of the window separates the two; the growing queue
that makes a drain long is what the trend tests measure directly.

Binning averages out the fast fluctuations of a busy queue, and the floors keep an idle
deployment's tiny absolute wiggles from counting; the thresholds sit well between what stable
and overloaded runs of the shipped scenarios give (tests/metrics/test_metrics_stability.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

NUM_TREND_BINS = 10
MAX_RELATIVE_GROWTH = 0.25
QUEUE_FLOOR_REQUESTS = 2.0  # growth of under one waiting request is noise, not a backlog
TTFT_FLOOR_S = 0.5  # growth of under 250 ms of TTFT is noise, not a backlog
MIN_T_STATISTIC = 3.0
MIN_REQUESTS_PER_BIN = 2  # fewer measured requests than this per bin: no verdict of steadiness
MIN_MEASURED_REQUESTS = MIN_REQUESTS_PER_BIN * NUM_TREND_BINS


@dataclass(slots=True, frozen=True)
class StabilityRules:
    """The thresholds of the stability test (defaults documented in the module)."""

    max_relative_growth: float = MAX_RELATIVE_GROWTH
    min_t_statistic: float = MIN_T_STATISTIC
    queue_floor_requests: float = QUEUE_FLOOR_REQUESTS
    ttft_floor_s: float = TTFT_FLOOR_S


@dataclass(slots=True, frozen=True)
class Stability:
    """The verdict and its evidence, as written to summary.json."""

    stable: bool
    reason: str | None  # why unstable, one line; None when stable
    arrivals_growth: float  # relative growth of the measured requests' arrival rate
    queue_mean: float  # mean waiting requests over the window
    queue_growth: float  # relative growth of the waiting queue over the window
    ttft_mean_s: float
    ttft_growth: float  # relative growth of the TTFT over the window
    drain_s: float  # arrivals' end to the last finished request
    drain_fraction: float  # drain_s / window length

    def summary_items(self) -> dict[str, bool | str | float | None]:
        """The summary.json keys: stable, unstable_reason and the stability_* evidence."""
        return {
            "stable": self.stable,
            "unstable_reason": self.reason,
            "stability_arrivals_growth": self.arrivals_growth,
            "stability_queue_mean": self.queue_mean,
            "stability_queue_growth": self.queue_growth,
            "stability_ttft_mean_s": self.ttft_mean_s,
            "stability_ttft_growth": self.ttft_growth,
            "drain_s": self.drain_s,
            "drain_fraction": self.drain_fraction,
        }


@dataclass(slots=True, frozen=True)
class Trend:
    """A binned series' mean, growth over the window relative to the mean, and the t statistic
    of its least-squares slope."""

    mean: float
    growth: float
    t_statistic: float

    def is_growing(self, rules: StabilityRules) -> bool:
        """Grows by more than the allowed fraction, and the slope is not noise."""
        return self.growth > rules.max_relative_growth and self.t_statistic > rules.min_t_statistic


def trend(values: np.ndarray, floor: float) -> Trend:
    """The trend of an evenly spaced series: growth = slope x number of bins / max(mean, floor).
    NaN bins are left out; fewer than 3 bins give NaN growth."""
    present = ~np.isnan(values)
    if present.sum() < 3:
        mean = float(np.nanmean(values)) if present.any() else math.nan
        return Trend(mean, math.nan, math.nan)
    positions = (np.arange(len(values)) + 0.5)[present]
    series = values[present]
    slope, intercept = (float(v) for v in np.polyfit(positions, series, 1))
    residuals = series - (slope * positions + intercept)
    spread = float(((positions - positions.mean()) ** 2).sum())
    standard_error = math.sqrt(float((residuals**2).sum()) / (len(series) - 2) / spread)
    if standard_error > 0:
        t_statistic = slope / standard_error
    else:
        t_statistic = math.copysign(math.inf, slope) if slope else 0.0
    mean = float(series.mean())
    return Trend(mean, slope * len(values) / max(mean, floor), t_statistic)


def binned_means(
    times: np.ndarray, values: np.ndarray, start: float, end: float, num_bins: int
) -> np.ndarray:
    """Mean of `values` per equal bin of `times` over [start, end); NaN for empty bins."""
    inside = (times >= start) & (times < end)
    indices = ((times[inside] - start) / (end - start) * num_bins).astype(np.int64)
    indices = np.minimum(indices, num_bins - 1)
    sums = np.bincount(indices, weights=values[inside], minlength=num_bins)
    counts = np.bincount(indices, minlength=num_bins)
    means = np.full(num_bins, np.nan)
    np.divide(sums, counts, out=means, where=counts > 0)
    return means


def binned_queue(
    waiting_time_per_second: Sequence[float] | npt.NDArray[np.float64],
    start: float,
    end: float,
    num_bins: int,
) -> np.ndarray:
    """Time-averaged waiting requests per equal bin of [start, end), from per-second integrals
    (request-seconds of waiting in [k, k + 1) at index k, spread evenly over that second)."""
    integrals = np.zeros(max(math.ceil(end) + 1, len(waiting_time_per_second)))
    integrals[: len(waiting_time_per_second)] = waiting_time_per_second
    cumulative = np.concatenate(([0.0], np.cumsum(integrals)))
    edges = np.linspace(start, end, num_bins + 1)
    whole = np.floor(edges).astype(np.int64)
    integral_until = cumulative[whole] + (edges - whole) * integrals[whole]
    return np.diff(integral_until) / np.diff(edges)


def ttft_trend(
    arrivals_s: np.ndarray,
    ttfts_s: np.ndarray,
    window_start_s: float,
    window_end_s: float,
    rules: StabilityRules = StabilityRules(),
) -> Trend:
    """The trend of the mean TTFT of the requests arriving in each bin of the window."""
    means_s = binned_means(arrivals_s, ttfts_s, window_start_s, window_end_s, NUM_TREND_BINS)
    return trend(means_s, rules.ttft_floor_s)


def assess_stability(
    *,
    arrivals_s: np.ndarray,
    ttfts_s: np.ndarray,
    waiting_time_per_second: Sequence[float] | npt.NDArray[np.float64],
    window_start_s: float,
    window_end_s: float,
    end_at: float,
    rules: StabilityRules = StabilityRules(),
) -> Stability:
    """Test the measured window [window_start_s, window_end_s) of a run that ended at end_at."""
    window_s = window_end_s - window_start_s
    drain_s = max(end_at - window_end_s, 0.0)
    drain_fraction = drain_s / window_s if window_s > 0 else math.nan
    nothing = Trend(math.nan, math.nan, math.nan)
    arrivals = queue = ttft = nothing
    if window_s > 0:
        edges = np.linspace(window_start_s, window_end_s, NUM_TREND_BINS + 1)
        counts = np.histogram(arrivals_s, edges)[0].astype(float)
        arrivals = trend(counts, 1.0)
        queue = trend(
            binned_queue(waiting_time_per_second, window_start_s, window_end_s, NUM_TREND_BINS),
            rules.queue_floor_requests,
        )
        ttft = ttft_trend(arrivals_s, ttfts_s, window_start_s, window_end_s, rules)
    reasons = []
    if len(ttfts_s) == 0:
        reasons.append("no request was measured")
    elif len(ttfts_s) < MIN_MEASURED_REQUESTS:
        reasons.append(
            f"too few requests measured to judge a steady state ({len(ttfts_s)}; at least "
            f"{MIN_MEASURED_REQUESTS}: a longer duration_s, or more of the trace)"
        )
    if arrivals.is_growing(rules):
        reasons.append(
            f"no steady load: the request rate grew by {arrivals.growth:.0%} over the window "
            "(sessions still accumulating: lengthen warmup_s; or a trace whose own rate rises)"
        )
    if queue.is_growing(rules):
        reasons.append(
            f"the waiting queue grew by {queue.growth:.0%} of its mean "
            f"({queue.mean:.3g} requests) over the window"
        )
    if ttft.is_growing(rules):
        reasons.append(
            f"TTFT grew by {ttft.growth:.0%} of its mean ({ttft.mean:.3g} s) over the window"
        )
    return Stability(
        stable=not reasons,
        reason="; ".join(reasons) if reasons else None,
        arrivals_growth=arrivals.growth,
        queue_mean=queue.mean,
        queue_growth=queue.growth,
        ttft_mean_s=ttft.mean,
        ttft_growth=ttft.growth,
        drain_s=drain_s,
        drain_fraction=drain_fraction,
    )
