"""Bounded-memory summaries of a run's traces: time-binned step totals and log-binned histograms.

Parquet files are read a batch of rows at a time and only in the columns needed, and every
result has a size fixed by its bins, so the memory used does not grow with the run's length.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sim.errors import InputError
from sim.metrics import EVENTS_FILE, REQUESTS_FILE, STEPS_FILE

BATCH_ROWS = 262_144
# Log-spaced histogram edges wide enough for any latency or block age a run can produce;
# values outside land in the first or last bin.
TTFT_EDGES_S = np.logspace(-5.0, 5.0, 1001)  # 100 bins per decade, 10 us .. 100000 s
BLOCK_AGE_EDGES_S = np.logspace(-3.0, 6.0, 181)  # 20 bins per decade, 1 ms .. 1e6 s
TIME_BIN_STEPS = (1.0, 2.0, 5.0, 10.0)  # bin widths are these x 10^k seconds


@dataclass(slots=True)
class StepBins:
    """Step totals per simulated-time bin; `exposure_s` is run time inside each bin, all runs."""

    edges_s: np.ndarray
    num_queries: np.ndarray
    num_hits: np.ndarray
    num_evictions: np.ndarray
    usage_time_s: np.ndarray  # sum of KV usage x step duration
    busy_s: np.ndarray  # sum of step durations
    exposure_s: np.ndarray
    cached_free_time_s: np.ndarray  # sum of cached-but-free share x step duration

    @classmethod
    def empty(cls, edges_s: np.ndarray) -> StepBins:
        """All-zero totals over the given bin edges."""
        zeros = np.zeros(len(edges_s) - 1)
        return cls(edges_s, *(zeros.copy() for _ in range(7)))

    def add(self, other: StepBins) -> None:
        """Add another run's totals (same edges)."""
        for name in (
            "num_queries",
            "num_hits",
            "num_evictions",
            "usage_time_s",
            "busy_s",
            "exposure_s",
            "cached_free_time_s",
        ):
            getattr(self, name)[:] += getattr(other, name)

    def centers_s(self) -> np.ndarray:
        """Bin midpoints."""
        return 0.5 * (self.edges_s[:-1] + self.edges_s[1:])

    def hit_rate(self) -> np.ndarray:
        """Token hit rate per bin, hits / queries; NaN where nothing was looked up."""
        return _ratio(self.num_hits, self.num_queries)

    def evictions_per_s(self) -> np.ndarray:
        """Evictions per second of run time; NaN in bins no run reached."""
        return _ratio(self.num_evictions, self.exposure_s)

    def mean_usage(self) -> np.ndarray:
        """KV usage averaged over step time; NaN where no step ran."""
        return _ratio(self.usage_time_s, self.busy_s)

    def mean_cached_free(self) -> np.ndarray:
        """Free blocks still holding a cached prefix, averaged over step time (share of blocks)."""
        return _ratio(self.cached_free_time_s, self.busy_s)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    result = np.full(len(numerator), np.nan)
    positive = denominator > 0
    result[positive] = numerator[positive] / denominator[positive]
    return result


def time_bin_edges(end_at: float, target_num_bins: int = 100) -> np.ndarray:
    """Edges from 0 past `end_at` with a 1/2/5 x 10^k width giving about `target_num_bins` bins."""
    if not end_at > 0:
        return np.array([0.0, 1.0])
    raw_width = end_at / target_num_bins
    exponent = math.floor(math.log10(raw_width))
    widths = [step * 10.0**exponent for step in TIME_BIN_STEPS]
    width = min(candidate for candidate in widths if candidate >= raw_width)
    num_bins = math.ceil(end_at / width)
    return np.arange(num_bins + 1) * width


def _bin_indices(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    indices = np.searchsorted(edges, values, side="right") - 1
    return np.clip(indices, 0, len(edges) - 2)


def _batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    try:
        parquet_file = pq.ParquetFile(path)
        yield from parquet_file.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    except (OSError, pa.ArrowException) as error:
        raise InputError(
            f"cannot read columns {columns} of this run trace: {error}", source=str(path)
        ) from None


def read_step_bins(run_dir: Path, edges_s: np.ndarray, end_at: float) -> StepBins:
    """Bin a run's steps by start time; the run covers [0, end_at]."""
    bins = StepBins.empty(edges_s)
    num_bins = len(edges_s) - 1
    columns = ["started_at", "duration_s", "usage", "num_queries", "num_hits", "num_evictions"]
    path = run_dir / STEPS_FILE
    # Runs written before the cached-free share existed simply lack it (drawn as 0).
    if "cached_free_usage" in _column_names(path):
        columns.append("cached_free_usage")
    for batch in _batches(path, columns):
        started_at = batch.column("started_at").to_numpy(zero_copy_only=False)
        duration_s = batch.column("duration_s").to_numpy(zero_copy_only=False)
        usage = batch.column("usage").to_numpy(zero_copy_only=False)
        indices = _bin_indices(started_at, edges_s)
        sums = [
            (bins.num_queries, batch.column("num_queries").to_numpy(zero_copy_only=False)),
            (bins.num_hits, batch.column("num_hits").to_numpy(zero_copy_only=False)),
            (bins.num_evictions, batch.column("num_evictions").to_numpy(zero_copy_only=False)),
            (bins.usage_time_s, usage * duration_s),
            (bins.busy_s, duration_s),
        ]
        if "cached_free_usage" in batch.schema.names:
            cached_free = batch.column("cached_free_usage").to_numpy(zero_copy_only=False)
            sums.append((bins.cached_free_time_s, cached_free * duration_s))
        for target, weights in sums:
            target += np.bincount(indices, weights=weights, minlength=num_bins)
    bins.exposure_s[:] = np.clip(np.minimum(edges_s[1:], end_at) - edges_s[:-1], 0.0, None)
    return bins


def _column_names(path: Path) -> list[str]:
    try:
        return pq.read_schema(path).names
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read this run trace: {error}", source=str(path)) from None


def _log_histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    values = values[~np.isnan(values)]
    return np.bincount(_bin_indices(values, edges), minlength=len(edges) - 1).astype(np.int64)


def read_ttft_counts(run_dir: Path, warmup_s: float) -> np.ndarray:
    """TTFT counts over TTFT_EDGES_S of the requests that arrived after warm-up."""
    counts = np.zeros(len(TTFT_EDGES_S) - 1, dtype=np.int64)
    for batch in _batches(run_dir / REQUESTS_FILE, ["arrival_at", "ttft_s"]):
        arrival_at = batch.column("arrival_at").to_numpy(zero_copy_only=False)
        ttft_s = batch.column("ttft_s").to_numpy(zero_copy_only=False)
        counts += _log_histogram(ttft_s[arrival_at >= warmup_s], TTFT_EDGES_S)
    return counts


def read_eviction_age_counts(run_dir: Path, warmup_s: float) -> np.ndarray | None:
    """Counts over BLOCK_AGE_EDGES_S of block age at eviction after warm-up; None without events."""
    path = run_dir / EVENTS_FILE
    if not path.is_file():
        return None
    counts = np.zeros(len(BLOCK_AGE_EDGES_S) - 1, dtype=np.int64)
    for batch in _batches(path, ["at", "kind", "age_since_stored_s"]):
        evicted = pc.and_(
            pc.equal(batch.column("kind"), "evicted"),
            pc.greater_equal(batch.column("at"), warmup_s),
        )
        ages_s = pc.filter(batch.column("age_since_stored_s"), evicted)
        counts += _log_histogram(
            ages_s.to_numpy(zero_copy_only=False).astype(np.float64), BLOCK_AGE_EDGES_S
        )
    return counts
