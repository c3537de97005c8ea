"""summary.json: percentiles, hit rate, throughput, usage and warm-up exclusion, exact values."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from step_helpers import steps_of

from sim.errors import InputError
from sim.metrics.goodput import GoodputSlos, parse_goodput
from sim.metrics.summary import SummaryRecorder, percentiles

# Five measured requests (arrivals 10..14) given as (ttft, e2e, queue, inter-token gaps, cached).
MEASURED_REQUESTS = [
    (0.4, 2.0, 0.0, [0.01, 0.02], 0),
    (0.1, 1.0, 0.05, [0.03], 16),
    (1.0, 5.0, 0.5, [0.04, 0.05, 0.06], 32),
    (0.3, 3.0, 0.1, [], 48),
    (0.2, 4.0, 0.15, [0.1], 64),
]


def add_measured_requests(recorder, make_request) -> None:
    """The five MEASURED_REQUESTS, arriving at 10..14 s, 100 prompt tokens each."""
    for index, (ttft_s, e2e_s, queue_s, gaps_s, num_cached) in enumerate(MEASURED_REQUESTS):
        arrival_at = 10.0 + index
        recorder.on_request_finished(
            make_request(
                request_id=f"r{index}",
                arrival_at=arrival_at,
                first_scheduled_at=arrival_at + queue_s,
                first_token_at=arrival_at + ttft_s,
                finished_at=arrival_at + e2e_s,
                num_prompt_tokens=100,
                num_cached_tokens=num_cached,
                num_computed_prefill_tokens=100 - num_cached,
                num_output_tokens=len(gaps_s) + 1,
                inter_token_latencies_s=gaps_s,
            )
        )


def run_warmup_scenario(path, make_step, make_request) -> dict:
    """Warm-up 10 s, arrivals until 15 s, end at 20 s; one request and one step fall inside the
    warm-up."""
    recorder = SummaryRecorder(path, warmup_s=10.0, duration_s=15.0)
    recorder.on_steps(
        steps_of(
            make_step(started_at=9.5, duration_s=0.5, usage=1.0, num_queries=1000,
                      num_hits=1000, num_preemptions=5, num_evictions=5),
            make_step(started_at=10.0, duration_s=1.0, usage=0.2, num_queries=200,
                      num_hits=0, num_preemptions=1, num_evictions=2),
            make_step(started_at=11.0, duration_s=3.0, usage=0.8, num_queries=200,
                      num_hits=100, num_evictions=1),
        )
    )  # fmt: skip
    recorder.on_request_finished(
        make_request(arrival_at=5.0, first_scheduled_at=5.0, first_token_at=55.0,
                     finished_at=60.0, num_output_tokens=50, num_cached_tokens=99,
                     inter_token_latencies_s=[9.0] * 49)
    )  # fmt: skip
    add_measured_requests(recorder, make_request)
    recorder.close(end_at=20.0)
    return json.loads(path.read_text())


def test_summary_over_the_measured_window(tmp_path, make_step, make_request):
    summary = run_warmup_scenario(tmp_path / "summary.json", make_step, make_request)
    assert summary == {
        "end_at": 20.0,
        "warmup_s": 10.0,
        "window_s": 10.0,
        "num_requests": 5,
        "num_requests_in_warmup": 1,
        "num_steps": 2,
        # sorted TTFTs 0.1 0.2 0.3 0.4 1.0: p90 at rank 3.6 -> 0.4 + 0.6 * 0.6
        "ttft_p50_s": 0.3,
        "ttft_p90_s": 0.76,
        "ttft_p99_s": 0.976,
        # sorted e2e 1..5: p99 at rank 3.96 -> 4 + 0.96
        "e2e_p50_s": 3.0,
        "e2e_p99_s": 4.96,
        # seven gaps 0.01..0.06, 0.1: p99 at rank 5.94 -> 0.06 + 0.94 * 0.04
        "itl_p50_s": 0.04,
        "itl_p99_s": 0.0976,
        # sorted queues 0 0.05 0.1 0.15 0.5: p99 -> 0.15 + 0.96 * 0.35
        "queue_p50_s": 0.1,
        "queue_p99_s": 0.486,
        "num_queries": 400,
        "num_hits": 100,
        "hit_rate": 0.25,
        "num_preemptions": 1,
        "num_evictions": 3,
        # (0.2 * 1 s + 0.8 * 3 s) / 4 s
        "kv_usage_mean": 0.65,
        "kv_usage_max": 0.8,
        "num_prompt_tokens": 500,
        "num_prefill_tokens_saved": 160,
        "num_computed_prefill_tokens": 340,
        "num_output_tokens": 12,
        "requests_per_s": 0.5,
        "output_tokens_per_s": 1.2,
        # (e2e - TTFT) / (tokens - 1): 0.8, 0.9, 4/3 and 3.8 (r3 has one token)
        "tpot_p50_s": 1.116666667,
        "tpot_p99_s": 3.726,
        # Ten 0.5 s bins over [10, 15): arrivals 1, 0, 1, 0, ... have slope -1/33 per bin,
        # growth -10/33 (mean 0.5 under the floor of 1); the TTFT bins 0.4, 0.1, 1.0, 0.3, 0.2
        # at bins 0, 2, 4, 6, 8 have slope -0.01, growth -0.1 / max(0.4, 0.5 floor).
        "stability_arrivals_growth": -0.303030303,
        "stability_queue_mean": 0.0,
        "stability_queue_growth": 0.0,
        "stability_ttft_mean_s": 0.4,
        "stability_ttft_growth": -0.2,
        "drain_s": 5.0,
        "drain_fraction": 1.0,
        # No trend is significant (the 5 s drain is evidence, not a verdict), but 5 requests in
        # ten bins are too few for the trend tests to say anything: no verdict of steadiness.
        "stable": False,
        "unstable_reason": (
            "too few requests measured to judge a steady state (5; at least 20: a longer "
            "duration_s, or more of the trace)"
        ),
    }


def test_without_warmup_everything_counts(tmp_path, make_step, make_request):
    path = tmp_path / "summary.json"
    recorder = SummaryRecorder(path)
    recorder.on_steps(
        steps_of(make_step(started_at=0.0, duration_s=2.0, usage=0.5, num_queries=10))
    )
    recorder.on_request_finished(make_request(arrival_at=0.0, first_token_at=0.5))
    recorder.close(end_at=4.0)
    summary = json.loads(path.read_text())
    assert summary["num_requests"] == 1
    assert summary["num_requests_in_warmup"] == 0
    assert summary["ttft_p99_s"] == 0.5
    assert summary["requests_per_s"] == 0.25
    assert summary["kv_usage_mean"] == 0.5
    assert summary["hit_rate"] == 0.0


def test_empty_run_writes_nulls_for_undefined_values(tmp_path):
    path = tmp_path / "summary.json"
    SummaryRecorder(path).close(end_at=0.0)
    summary = json.loads(path.read_text())
    undefined = [key for key, value in summary.items() if value is None]
    assert undefined == [
        "drain_fraction",
        "e2e_p50_s",
        "e2e_p99_s",
        "hit_rate",
        "itl_p50_s",
        "itl_p99_s",
        "kv_usage_max",
        "kv_usage_mean",
        "output_tokens_per_s",
        "queue_p50_s",
        "queue_p99_s",
        "requests_per_s",
        "stability_arrivals_growth",
        "stability_queue_growth",
        "stability_queue_mean",
        "stability_ttft_growth",
        "stability_ttft_mean_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
    ]
    assert summary["stable"] is False
    assert summary["unstable_reason"] == "no request was measured"
    assert summary["num_requests"] == 0


def test_json_has_sorted_keys_rounded_floats_and_a_final_newline(tmp_path, make_request):
    path = tmp_path / "summary.json"
    recorder = SummaryRecorder(path)
    recorder.on_request_finished(make_request(arrival_at=0.0, first_token_at=1 / 3))
    recorder.close(end_at=3.0)
    text = path.read_text()
    assert text.endswith("}\n")
    assert '"ttft_p50_s": 0.333333333,' in text
    assert '"requests_per_s": 0.333333333,' in text
    assert "NaN" not in text
    keys = list(json.loads(text))
    assert keys == sorted(keys)
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_negative_warmup_is_rejected(tmp_path):
    with pytest.raises(InputError, match="warmup_s must be >= 0 seconds, got -1.0"):
        SummaryRecorder(tmp_path / "summary.json", warmup_s=-1.0)


def test_goodput_counts_requests_meeting_every_given_limit(tmp_path, make_step, make_request):
    # The five measured requests with TTFT <= 0.45 s and TPOT <= 1 s: r0 (0.4, 0.8), r1 (0.1,
    # 0.9) and r3 (0.3, one token: TPOT 0); r2 has TTFT 1.0 and r4 TPOT 3.8. 3 over 10 s.
    recorder_path = tmp_path / "summary.json"
    goodput = parse_goodput(["ttft:450", "tpot:1000"])
    assert goodput == GoodputSlos(ttft_s=0.45, tpot_s=1.0)
    recorder = SummaryRecorder(recorder_path, warmup_s=10.0, duration_s=15.0, goodput=goodput)
    for index, (ttft_s, e2e_s, queue_s, gaps_s, _) in enumerate(MEASURED_REQUESTS):
        recorder.on_request_finished(
            make_request(
                arrival_at=10.0 + index,
                first_scheduled_at=10.0 + index + queue_s,
                first_token_at=10.0 + index + ttft_s,
                finished_at=10.0 + index + e2e_s,
                num_output_tokens=len(gaps_s) + 1,
                inter_token_latencies_s=gaps_s,
            )
        )
    recorder.close(end_at=20.0)
    summary = json.loads(recorder_path.read_text())
    assert summary["goodput_slos"] == "ttft:450 tpot:1000"
    assert summary["num_good_requests"] == 3
    assert summary["goodput_per_s"] == 0.3


@pytest.mark.parametrize(
    ("texts", "problem"),
    [
        (["ttft=400"], "expected NAME:MILLISECONDS with NAME one of ttft, tpot, e2el"),
        (["itl:50"], "expected NAME:MILLISECONDS with NAME one of ttft, tpot, e2el"),
        (["ttft:0"], "the limit must be positive"),
        (["ttft:1", "ttft:2"], "ttft is given twice"),
    ],
)
def test_bad_goodput_limits_are_input_errors(texts, problem) -> None:
    with pytest.raises(InputError, match=problem):
        parse_goodput(texts)


@settings(max_examples=30, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.floats(0.0, 30.0, allow_nan=False),
            st.sampled_from((0.0, 0.013, 0.1, 0.37, 1.1)),
            st.integers(0, 20),
            st.floats(0.0, 1.0, allow_nan=False),
        ),
        max_size=60,
    ),
    warmup_s=st.sampled_from((0.0, 4.0)),
)
def test_batched_sums_equal_adding_steps_one_by_one(make_step, steps, warmup_s):
    # Invariant: one batch of steps gives the float sums of adding each step in order, left to
    # right, as a loop over single steps does (busy time, usage integral, waiting per second).
    recorder = SummaryRecorder(Path("unused.json"), warmup_s=warmup_s)
    records = [
        make_step(started_at=started_at, duration_s=duration_s, num_waiting=waiting, usage=usage)
        for started_at, duration_s, waiting, usage in steps
    ]
    recorder.on_steps(steps_of(*records))
    busy_s = usage_time_s = 0.0
    per_second: list[float] = []
    for step in records:
        if step.num_waiting:
            second = int(step.started_at)
            per_second.extend([0.0] * (second + 1 - len(per_second)))
            per_second[second] += step.num_waiting * step.duration_s
        if step.started_at >= warmup_s:
            busy_s += step.duration_s
            usage_time_s += step.usage * step.duration_s
    assert recorder.busy_s == busy_s
    assert recorder.usage_time_s == usage_time_s
    assert recorder.waiting_time_per_second.tolist() == per_second
    assert recorder.num_steps == sum(1 for step in records if step.started_at >= warmup_s)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False), max_size=40),
    qs=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=4),
)
def test_percentiles_in_place_equal_percentiles_of_a_copy(values, qs):
    """Reordering the values in place (the summary's way of sparing a copy of every gap) gives
    numpy's linear percentiles bit for bit, and the same values, in another order."""
    by_copy = percentiles(array("d", values), tuple(qs))
    in_place = array("d", values)
    assert percentiles(in_place, tuple(qs), reorder=True) == by_copy
    assert sorted(in_place) == sorted(values)


def test_reading_the_summary_twice_gives_the_same_document(tmp_path, make_step, make_request):
    """Five measured requests: the second read, after the in-place percentiles, equals the first
    (TTFT p90 0.76, ITL p99 0.0976, stability untouched)."""
    recorder = SummaryRecorder(tmp_path / "summary.json", warmup_s=0.0, duration_s=15.0)
    add_measured_requests(recorder, make_request)
    first = recorder.summary(end_at=20.0)
    assert (first["ttft_p90_s"], first["itl_p99_s"]) == pytest.approx((0.76, 0.0976))
    assert recorder.summary(end_at=20.0) == first
