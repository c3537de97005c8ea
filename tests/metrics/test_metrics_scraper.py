"""metrics.parquet: scrape grid, state at each scrape time, vLLM names and bucket rows."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from step_helpers import steps_of

from sim.errors import InputError
from sim.metrics.exact_sums import CHUNK_VALUES
from sim.metrics.prometheus import (
    FIXED_HISTOGRAM_EDGES,
    REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_QUEUE_TIME_SECONDS,
    Histogram,
    request_tokens_bucket_edges,
)
from sim.metrics.scraper import METRICS_SCHEMA, MetricsScraper

MAX_MODEL_LEN = 1024  # token-count histograms: edges 1, 2, 5, ..., 500, 1000
# Per replica: 6 counters + 5 request_success reasons + 4 gauges, then per histogram its edges
# + "+Inf" + _sum + _count: TTFT 22, ITL 19, TPOT 19, five request-phase times 21 each,
# preemptions 7, iteration tokens 13 and three token-count histograms 10 each.
ROWS_PER_SCRAPE = 6 + 5 + 4 + 25 + 22 + 22 + 5 * 24 + 10 + 16 + 3 * 13
E2E = "vllm:e2e_request_latency_seconds_bucket"
QUEUE = "vllm:request_queue_time_seconds_bucket"


def make_scraper(path: Path, interval: float, **options) -> MetricsScraper:
    return MetricsScraper(path, interval, max_model_len=MAX_MODEL_LEN, **options)


def scrape(path: Path, replica: int = 0) -> dict[float, dict[tuple[str, str | None], float]]:
    """Read one replica's rows of metrics.parquet as {scrape time: {(name, le): value}}."""
    scrapes: dict[float, dict[tuple[str, str | None], float]] = {}
    for row in pq.read_table(path).to_pylist():
        if row["replica"] == replica and row["finished_reason"] in (None, "length"):
            scrapes.setdefault(row["at"], {})[(row["name"], row["le"])] = row["value"]
    return scrapes


def test_steps_before_boundaries_give_scrapes_at_each_boundary_and_close(tmp_path, make_step):
    # Steps at 0.0, 0.4 and 2.7 with a 1.0 s interval, closed at 2.9: scrapes at 1.0, 2.0, 2.9.
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 1.0)
    scraper.on_steps(steps_of(make_step(started_at=0.0, num_queries=100, num_hits=0, usage=0.1)))
    scraper.on_steps(steps_of(make_step(started_at=0.4, num_queries=50, num_hits=32, usage=0.3,
                              num_running=2, num_waiting=1)))  # fmt: skip
    scraper.on_steps(steps_of(make_step(started_at=2.7, num_queries=10, num_hits=8, usage=0.5,
                              num_preemptions=1, num_running=1)))  # fmt: skip
    scraper.close(end_at=2.9)

    table = pq.read_table(path)
    assert table.schema == METRICS_SCHEMA
    assert table.num_rows == 3 * ROWS_PER_SCRAPE
    scrapes = scrape(path)
    assert sorted(scrapes) == [1.0, 2.0, 2.9]
    for at in (1.0, 2.0):
        assert scrapes[at][("vllm:prefix_cache_queries_total", None)] == 150.0
        assert scrapes[at][("vllm:prefix_cache_hits_total", None)] == 32.0
        assert scrapes[at][("vllm:kv_cache_usage_perc", None)] == 0.3
        assert scrapes[at][("vllm:num_requests_running", None)] == 2.0
        assert scrapes[at][("vllm:num_requests_waiting", None)] == 1.0
        assert scrapes[at][("vllm:num_preemptions_total", None)] == 0.0
    final = scrapes[2.9]
    assert final[("vllm:prefix_cache_queries_total", None)] == 160.0
    assert final[("vllm:prefix_cache_hits_total", None)] == 40.0
    assert final[("vllm:kv_cache_usage_perc", None)] == 0.5
    assert final[("vllm:num_requests_running", None)] == 1.0
    assert final[("vllm:num_requests_waiting", None)] == 0.0
    assert final[("vllm:num_preemptions_total", None)] == 1.0


def test_step_exactly_on_a_boundary_is_in_that_scrape(tmp_path, make_step):
    # A step stamped 1.0 counts in the 1.0 scrape; closing at 2.0 adds no extra scrape.
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 1.0)
    scraper.on_steps(steps_of(make_step(started_at=1.0, num_queries=7)))
    scraper.close(end_at=2.0)
    scrapes = scrape(path)
    assert sorted(scrapes) == [1.0, 2.0]
    assert scrapes[1.0][("vllm:prefix_cache_queries_total", None)] == 7.0


def test_scrape_times_are_multiples_of_the_interval_without_drift(tmp_path, make_step):
    # 0.1 added ten times is 0.9999999999999999; the grid uses index * interval instead.
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 0.1)
    scraper.close(end_at=1.0)
    assert sorted(scrape(path)) == [index * 0.1 for index in range(1, 11)]


def test_request_observations_fill_histograms_with_inclusive_edges(tmp_path, make_request):
    # TTFT 0.5 sits exactly on an edge (le is inclusive); gaps 0.02, 0.05, 100.0; e2e 2.0;
    # queue 0.25 falls below the first request-latency edge (0.3).
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 10.0)
    scraper.on_request_finished(
        make_request(
            arrival_at=0.0,
            first_scheduled_at=0.25,
            first_token_at=0.5,
            finished_at=2.0,
            num_prompt_tokens=100,
            num_output_tokens=4,
            inter_token_latencies_s=[0.02, 0.05, 100.0],
        )
    )
    scraper.close(end_at=3.0)
    (final,) = scrape(path).values()
    assert final[("vllm:prompt_tokens_total", None)] == 100.0
    assert final[("vllm:generation_tokens_total", None)] == 4.0
    assert final[("vllm:request_success_total", None)] == 1.0

    ttft = "vllm:time_to_first_token_seconds"
    assert final[(f"{ttft}_bucket", "0.25")] == 0.0
    assert final[(f"{ttft}_bucket", "0.5")] == 1.0
    assert final[(f"{ttft}_bucket", "2560.0")] == 1.0
    assert final[(f"{ttft}_bucket", "+Inf")] == 1.0
    assert final[(f"{ttft}_sum", None)] == 0.5
    assert final[(f"{ttft}_count", None)] == 1.0

    itl = "vllm:inter_token_latency_seconds"
    assert final[(f"{itl}_bucket", "0.01")] == 0.0
    assert final[(f"{itl}_bucket", "0.025")] == 1.0
    assert final[(f"{itl}_bucket", "0.05")] == 2.0
    assert final[(f"{itl}_bucket", "80.0")] == 2.0
    assert final[(f"{itl}_bucket", "+Inf")] == 3.0
    assert final[(f"{itl}_sum", None)] == pytest.approx(100.07)
    assert final[(f"{itl}_count", None)] == 3.0

    assert final[(E2E, "1.5")] == 0.0
    assert final[(E2E, "2.0")] == 1.0
    assert final[(QUEUE, "0.3")] == 1.0
    # Prefill 0.25 s, decode 1.5 s, inference 1.75 s; TPOT 1.5 s / 3 = 0.5 s; 100 prompt tokens.
    assert final[("vllm:request_prefill_time_seconds_sum", None)] == 0.25
    assert final[("vllm:request_decode_time_seconds_sum", None)] == 1.5
    assert final[("vllm:request_inference_time_seconds_sum", None)] == 1.75
    assert final[("vllm:request_time_per_output_token_seconds_sum", None)] == 0.5
    assert final[("vllm:request_prompt_tokens_bucket", "50.0")] == 0.0
    assert final[("vllm:request_prompt_tokens_bucket", "100.0")] == 1.0
    assert final[("vllm:request_generation_tokens_sum", None)] == 4.0


def test_bucket_labels_and_row_order_follow_prometheus(tmp_path):
    path = tmp_path / "metrics.parquet"
    make_scraper(path, 1.0).close(end_at=0.5)
    rows = pq.read_table(path).to_pylist()
    assert [row["at"] for row in rows] == [0.5] * ROWS_PER_SCRAPE
    assert {row["replica"] for row in rows} == {0}
    names = [row["name"] for row in rows]
    assert names[:15] == [
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:prompt_tokens_cached_total",
        "vllm:generation_tokens_total",
        *["vllm:request_success_total"] * 5,
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "prefixsim:kv_cache_cached_free_perc",
    ]
    assert [row["finished_reason"] for row in rows[6:11]] == [
        "stop", "length", "abort", "error", "repetition",
    ]  # fmt: skip
    ttft_labels = [
        row["le"] for row in rows if row["name"] == "vllm:time_to_first_token_seconds_bucket"
    ]
    assert ttft_labels[:3] == ["0.001", "0.005", "0.01"]
    assert ttft_labels[-2:] == ["2560.0", "+Inf"]
    assert names[15 + 22 + 1 : 15 + 22 + 3] == [
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
    ]
    assert all(row["le"] is None for row in rows[:15])
    prompt_labels = [
        row["le"] for row in rows if row["name"] == "vllm:request_prompt_tokens_bucket"
    ]
    assert prompt_labels == [
        "1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "+Inf",
    ]  # fmt: skip


def test_histogram_edges_are_vllms():
    assert FIXED_HISTOGRAM_EDGES[REQUEST_QUEUE_TIME_SECONDS] == REQUEST_LATENCY_BUCKET_EDGES == (
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
        30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
    )  # fmt: skip
    assert request_tokens_bucket_edges(32768)[-3:] == (5000.0, 10000.0, 20000.0)
    assert len(request_tokens_bucket_edges(32768)) == 14


def test_every_replica_has_its_own_series(tmp_path, make_step):
    # Two replicas: replica 1 steps last, yet replica 0's gauges keep its own values.
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 1.0, num_replicas=2)
    scraper.on_steps(steps_of(make_step(started_at=0.1, usage=0.4, num_waiting=3, replica=0)))
    scraper.on_steps(steps_of(make_step(started_at=0.2, usage=0.1, num_waiting=0, replica=1,
                              cached_free_usage=0.75, num_queries=10)))  # fmt: skip
    scraper.close(end_at=0.5)
    first, second = scrape(path, 0)[0.5], scrape(path, 1)[0.5]
    assert first[("vllm:kv_cache_usage_perc", None)] == 0.4
    assert first[("vllm:num_requests_waiting", None)] == 3.0
    assert first[("vllm:prefix_cache_queries_total", None)] == 0.0
    assert second[("vllm:kv_cache_usage_perc", None)] == 0.1
    assert second[("prefixsim:kv_cache_cached_free_perc", None)] == 0.75
    assert second[("vllm:prefix_cache_queries_total", None)] == 10.0
    assert pq.read_table(path).num_rows == 2 * ROWS_PER_SCRAPE


def test_interval_must_be_positive(tmp_path):
    with pytest.raises(InputError, match="scrape_interval_s must be > 0 seconds, got 0.0"):
        make_scraper(tmp_path / "metrics.parquet", 0.0)


def test_close_before_the_last_hook_is_an_error(tmp_path, make_step):
    scraper = make_scraper(tmp_path / "metrics.parquet", 1.0)
    scraper.on_steps(steps_of(make_step(started_at=5.0)))
    with pytest.raises(ValueError, match="close at 4.0 is before the last hook at 5.0"):
        scraper.close(end_at=4.0)


@settings(max_examples=40, deadline=None)
@given(
    step_times=st.lists(st.floats(0.0, 20.0, allow_nan=False), max_size=25).map(sorted),
    interval=st.sampled_from([0.5, 1.0, 3.0]),
    tail_s=st.floats(0.0, 5.0, allow_nan=False),
)
def test_scrapes_cover_the_grid_and_count_steps_up_to_their_time(
    make_step, step_times, interval, tail_s
):
    # Invariant: scrape times are the grid points in (0, end] plus end itself, and each scrape's
    # query counter equals the total of the steps started at or before it.
    end_at = (step_times[-1] if step_times else 0.0) + tail_s
    with tempfile.TemporaryDirectory() as out_dir:
        path = Path(out_dir) / "metrics.parquet"
        scraper = make_scraper(path, interval, batch_rows=50)
        for started_at in step_times:
            scraper.on_steps(steps_of(make_step(started_at=started_at, num_queries=3)))
        scraper.close(end_at=end_at)
        scrapes = scrape(path)
    grid = [k * interval for k in range(1, int(end_at / interval) + 2) if k * interval <= end_at]
    assert sorted(scrapes) == sorted(set(grid) | {end_at})
    for at, series in scrapes.items():
        expected_queries = 3.0 * sum(1 for started_at in step_times if started_at <= at)
        assert series[("vllm:prefix_cache_queries_total", None)] == expected_queries


def test_histogram_batch_gives_each_cut_the_state_of_the_values_before_it() -> None:
    # Values on, between and beyond the ITL bucket edges; cut at 0, 4 and 9 values. Buckets
    # count alone (the last: above 80.0); the sum adds left to right, as one at a time.
    values = [0.01, 0.0100001, 0.1, 0.2, 0.3, 0.025, 80.0, 81.0, 0.0]
    histogram = Histogram((0.01, 0.025, 0.05, 0.1, 0.5, 80.0))
    cuts = np.array([0, 4, 9])
    rows = np.zeros((3, histogram.width))
    array = np.array(values)
    histogram.advance(array, cuts, array, cuts, rows)
    assert rows[0].tolist() == [0, 0, 0, 0, 0, 0, 0, 0.0, 0]
    assert rows[1].tolist() == [1, 1, 0, 1, 1, 0, 0, 0.01 + 0.0100001 + 0.1 + 0.2, 4]
    total = 0.0
    for value in values:
        total += value
    assert rows[2].tolist() == [2, 2, 0, 1, 2, 1, 1, total, 9]
    assert histogram.raw_values().tolist() == rows[2].tolist()


def test_histogram_counts_a_batch_longer_than_a_chunk_as_one() -> None:
    # 98,304 values (three chunks of CHUNK_VALUES = 32,768) cycling 0.5, 1.5, 2.5 over edges 1
    # and 2; cuts inside the first chunk, just past its end and at the end: each cut counts the
    # first counted[j] values whichever chunks they lie in.
    assert CHUNK_VALUES == 32_768
    histogram = Histogram((1.0, 2.0))
    values = np.tile([0.5, 1.5, 2.5], CHUNK_VALUES)
    counted = np.array([0, 32_767, 32_770, 98_304])
    rows = np.zeros((4, histogram.width))
    histogram.advance(values, counted, np.zeros(len(values)), np.arange(4), rows)
    assert rows[:, :3].tolist() == [
        [0, 0, 0],
        [10_923, 10_922, 10_922],
        [10_924, 10_923, 10_923],
        [32_768, 32_768, 32_768],
    ]
    assert rows[:, 4].tolist() == [0, 32_767, 32_770, 98_304]
    assert histogram.bucket_counts.tolist() == [32_768, 32_768, 32_768]


def test_histogram_sum_grows_by_the_totals_given_per_item() -> None:
    # Inter-token gaps: three gaps of one request count in the buckets one by one, and the sum
    # grows by the request's exact sum (fsum), 0.6 rather than 0.1 + 0.2 + 0.3 = 0.6000000000000001.
    histogram = Histogram((1.0,))
    cuts = np.array([1])
    rows = np.zeros((1, histogram.width))
    gaps = np.array([0.1, 0.2, 0.3])
    histogram.advance(gaps, np.array([3]), np.array([math.fsum(gaps)]), cuts, rows)
    assert rows[0].tolist() == [3, 0, 0.6, 3]
    assert histogram.total == 0.6


def test_a_batch_handed_after_later_requests_still_counts_at_its_own_times(
    tmp_path, make_step, make_request
):
    # Interval 1.0: a request finishing at 1.3 arrives before the batch of steps stamped 0.5 and
    # 1.2 that produced it; the 1.0 scrape still has the 0.5 step (10 queries, usage 0.25) and
    # no request, the 2.0 scrape both steps (15 queries, usage 0.5) and the request.
    path = tmp_path / "metrics.parquet"
    scraper = make_scraper(path, 1.0)
    scraper.on_request_finished(make_request(arrival_at=0.2, finished_at=1.3))
    scraper.on_steps(
        steps_of(
            make_step(started_at=0.5, num_queries=10, usage=0.25),
            make_step(started_at=1.2, num_queries=5, usage=0.5),
        )
    )
    scraper.close(end_at=2.0)
    scrapes = scrape(path)
    assert sorted(scrapes) == [1.0, 2.0]
    assert scrapes[1.0][("vllm:prefix_cache_queries_total", None)] == 10.0
    assert scrapes[1.0][("vllm:kv_cache_usage_perc", None)] == 0.25
    assert scrapes[1.0][("vllm:request_success_total", None)] == 0.0
    assert scrapes[2.0][("vllm:prefix_cache_queries_total", None)] == 15.0
    assert scrapes[2.0][("vllm:kv_cache_usage_perc", None)] == 0.5
    assert scrapes[2.0][("vllm:request_success_total", None)] == 1.0
