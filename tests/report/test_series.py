"""Binned step totals and log histograms read from a tiny run's parquet traces."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from report_runs import run_tiny

from sim.report import series
from sim.report.series import (
    BLOCK_AGE_EDGES_S,
    TTFT_EDGES_S,
    read_eviction_age_counts,
    read_step_bins,
    read_ttft_counts,
    time_bin_edges,
)


@pytest.mark.parametrize(
    ("end_at", "width_s", "num_bins"),
    [(10.0, 0.1, 100), (35.0, 0.5, 70), (187.7, 2.0, 94), (1000.0, 10.0, 100), (0.3, 0.005, 60)],
)
def test_time_bins_have_round_widths(end_at, width_s, num_bins):
    """About 100 bins of 1, 2 or 5 x 10^k seconds, from 0 to the first edge >= end_at."""
    edges = time_bin_edges(end_at)
    assert len(edges) == num_bins + 1
    assert edges[1] == pytest.approx(width_s)
    assert edges[0] == 0.0 and edges[-1] >= end_at > edges[-2]


def test_step_bins_keep_every_total(single_run_dir):
    """Bins add up to the steps file's totals; per-bin hits match a pandas groupby."""
    summary = json.loads((single_run_dir / "summary.json").read_text())
    edges = time_bin_edges(summary["end_at"])
    bins = read_step_bins(single_run_dir, edges, summary["end_at"])
    steps = pd.read_parquet(single_run_dir / "steps.parquet")
    assert bins.num_queries.sum() == steps.num_queries.sum()
    assert bins.num_hits.sum() == steps.num_hits.sum()
    assert bins.num_evictions.sum() == steps.num_evictions.sum() > 0
    assert bins.busy_s.sum() == pytest.approx(steps.duration_s.sum(), rel=1e-12)
    assert bins.usage_time_s.sum() == pytest.approx((steps.usage * steps.duration_s).sum())
    assert bins.exposure_s.sum() == pytest.approx(summary["end_at"], rel=1e-12)
    width_s = edges[1]
    hits_by_bin = steps.groupby((steps.started_at // width_s).astype(int)).num_hits.sum()
    assert dict(hits_by_bin[hits_by_bin > 0]) == {
        index: hits for index, hits in enumerate(bins.num_hits) if hits > 0
    }


def test_ttft_counts_cover_the_measured_requests(single_run_dir):
    """Requests arriving at or after the 2 s warm-up: as many as summary.json measured."""
    summary = json.loads((single_run_dir / "summary.json").read_text())
    counts = read_ttft_counts(single_run_dir, summary["warmup_s"])
    assert len(counts) == len(TTFT_EDGES_S) - 1
    assert counts.sum() == summary["num_requests"] > 0
    requests = pd.read_parquet(single_run_dir / "requests.parquet")
    fastest = requests.ttft_s[requests.arrival_at >= 2.0].min()
    first_bin = np.flatnonzero(counts)[0]
    assert TTFT_EDGES_S[first_bin] <= fastest < TTFT_EDGES_S[first_bin + 1]


def test_eviction_ages_count_evictions_after_warmup(single_run_dir):
    """One count per `evicted` event at or after warm-up with a known age."""
    counts = read_eviction_age_counts(single_run_dir, 2.0)
    events = pd.read_parquet(single_run_dir / "events.parquet")
    evicted = events[(events["kind"] == "evicted") & (events["at"] >= 2.0)]
    assert counts is not None and len(counts) == len(BLOCK_AGE_EDGES_S) - 1
    assert counts.sum() == evicted.age_since_stored_s.notna().sum() > 0


def test_small_batches_give_the_same_answers(single_run_dir, monkeypatch):
    """Reading 7 rows at a time (many batches) changes nothing."""
    edges = time_bin_edges(40.0)
    whole = read_step_bins(single_run_dir, edges, 40.0)
    whole_ttft = read_ttft_counts(single_run_dir, 2.0)
    whole_ages = read_eviction_age_counts(single_run_dir, 2.0)
    monkeypatch.setattr(series, "BATCH_ROWS", 7)
    batched = read_step_bins(single_run_dir, edges, 40.0)
    assert np.array_equal(batched.num_hits, whole.num_hits)
    assert np.allclose(batched.usage_time_s, whole.usage_time_s, rtol=1e-12)
    assert np.array_equal(read_ttft_counts(single_run_dir, 2.0), whole_ttft)
    assert np.array_equal(read_eviction_age_counts(single_run_dir, 2.0), whole_ages)


def test_run_without_events_has_no_age_counts(tmp_path):
    """outputs.events: false writes no events.parquet; the ages are None, not an error."""
    run_tiny(tmp_path / "run", seed=0, events=False)
    assert not (tmp_path / "run" / "events.parquet").exists()
    assert read_eviction_age_counts(tmp_path / "run", 2.0) is None
