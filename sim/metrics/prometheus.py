"""vLLM's Prometheus metric names and latency histogram bucket edges, plus cumulative state.

Bucket edges are data taken from vLLM's `vllm/v1/metrics/loggers.py` (PrometheusStatLogger) as
of the 0.12 development line, where the TTFT, e2e and queue-time edges are unchanged since v0.8 and
the inter-token-latency edges equal the older time-per-output-token ones. Re-check them when the
targeted vLLM release moves.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate

import numpy as np

from sim.metrics.records import RequestRecord, StepRecord

PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits"
NUM_PREEMPTIONS = "vllm:num_preemptions"
PROMPT_TOKENS = "vllm:prompt_tokens"
GENERATION_TOKENS = "vllm:generation_tokens"
KV_CACHE_USAGE_PERC = "vllm:kv_cache_usage_perc"
NUM_REQUESTS_RUNNING = "vllm:num_requests_running"
NUM_REQUESTS_WAITING = "vllm:num_requests_waiting"
TIME_TO_FIRST_TOKEN_SECONDS = "vllm:time_to_first_token_seconds"
INTER_TOKEN_LATENCY_SECONDS = "vllm:inter_token_latency_seconds"
E2E_REQUEST_LATENCY_SECONDS = "vllm:e2e_request_latency_seconds"
REQUEST_QUEUE_TIME_SECONDS = "vllm:request_queue_time_seconds"

COUNTER_NAMES = (
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    NUM_PREEMPTIONS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
)
GAUGE_NAMES = (KV_CACHE_USAGE_PERC, NUM_REQUESTS_RUNNING, NUM_REQUESTS_WAITING)

TTFT_BUCKET_EDGES_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKET_EDGES_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
# vLLM shares one edge list between e2e latency and queue time.
REQUEST_LATENCY_BUCKET_EDGES_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

HISTOGRAM_BUCKET_EDGES_S = {
    TIME_TO_FIRST_TOKEN_SECONDS: TTFT_BUCKET_EDGES_S,
    INTER_TOKEN_LATENCY_SECONDS: INTER_TOKEN_LATENCY_BUCKET_EDGES_S,
    E2E_REQUEST_LATENCY_SECONDS: REQUEST_LATENCY_BUCKET_EDGES_S,
    REQUEST_QUEUE_TIME_SECONDS: REQUEST_LATENCY_BUCKET_EDGES_S,
}

INF_LABEL = "+Inf"


def bucket_label(edge: float) -> str:
    """Format an edge as Prometheus' `le` label does for floats: 0.001, 1.0, 2560.0."""
    return repr(float(edge))


class Histogram:
    """A Prometheus histogram: a value lands in every bucket whose edge is >= it."""

    def __init__(self, edges: tuple[float, ...]) -> None:
        self.edges = edges
        self._edges_array = np.asarray(edges, dtype=float)
        self._labels = [bucket_label(edge) for edge in edges]
        self.bucket_counts = [0] * (len(edges) + 1)  # last slot: above every edge
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.bucket_counts[bisect_left(self.edges, value)] += 1
        self.total += value
        self.count += 1

    def observe_many(self, values: Sequence[float]) -> None:
        """Add many observations at once (vectorised; the sum is taken exactly, with fsum)."""
        if not values:
            return
        positions = np.searchsorted(self._edges_array, values, side="left")
        for position, count in enumerate(np.bincount(positions, minlength=len(self.bucket_counts))):
            self.bucket_counts[position] += int(count)
        self.total += math.fsum(values)
        self.count += len(values)

    def samples(self, name: str) -> list[tuple[str, str | None, float]]:
        """Cumulative bucket rows (edges ascending, then +Inf), then `_sum` and `_count`."""
        cumulative = accumulate(self.bucket_counts[:-1])
        rows: list[tuple[str, str | None, float]] = [
            (name, label, float(count))
            for label, count in zip(self._labels, cumulative, strict=True)
        ]
        rows.append((name, INF_LABEL, float(self.count)))
        rows.append((f"{name}_sum", None, self.total))
        rows.append((f"{name}_count", None, float(self.count)))
        return rows


class PrometheusState:
    """Cumulative counters, last-set gauges and histograms, fed from steps and finished requests.

    Step counters and gauges follow vLLM's per-iteration scheduler stats. Request histograms and
    the prompt/generation token counters are fed when the request finishes: vLLM observes TTFT
    and inter-token gaps as tokens appear, but the recorder learns them only at the finish.
    """

    def __init__(self) -> None:
        self.counters = dict.fromkeys(COUNTER_NAMES, 0.0)
        self.gauges = dict.fromkeys(GAUGE_NAMES, 0.0)
        self.histograms = {
            name: Histogram(edges) for name, edges in HISTOGRAM_BUCKET_EDGES_S.items()
        }

    def apply_step(self, step: StepRecord) -> None:
        """Count the step's lookups, hits and preemptions; set the gauges."""
        self.counters[PREFIX_CACHE_QUERIES] += step.num_queries
        self.counters[PREFIX_CACHE_HITS] += step.num_hits
        self.counters[NUM_PREEMPTIONS] += step.num_preemptions
        self.gauges[KV_CACHE_USAGE_PERC] = step.usage
        self.gauges[NUM_REQUESTS_RUNNING] = float(step.num_running)
        self.gauges[NUM_REQUESTS_WAITING] = float(step.num_waiting)

    def apply_finished_request(self, request: RequestRecord) -> None:
        """Count the request's tokens and observe its latencies."""
        self.counters[PROMPT_TOKENS] += request.num_prompt_tokens
        self.counters[GENERATION_TOKENS] += request.num_output_tokens
        self.histograms[TIME_TO_FIRST_TOKEN_SECONDS].observe(request.ttft_s)
        self.histograms[E2E_REQUEST_LATENCY_SECONDS].observe(request.e2e_s)
        self.histograms[REQUEST_QUEUE_TIME_SECONDS].observe(request.queue_s)
        self.histograms[INTER_TOKEN_LATENCY_SECONDS].observe_many(request.inter_token_latencies_s)

    def samples(self) -> list[tuple[str, str | None, float]]:
        """Every series as (name, le, value): counters, gauges, then histograms, fixed order."""
        rows: list[tuple[str, str | None, float]] = [
            (name, None, value) for name, value in self.counters.items()
        ]
        rows.extend((name, None, value) for name, value in self.gauges.items())
        for name, histogram in self.histograms.items():
            rows.extend(histogram.samples(name))
        return rows
