"""summary.json: one run's headline numbers over the measured window.

Warm-up: requests arriving before `warmup_s` and steps starting before it are left out of every
statistic; the measured window is [warmup_s, end_at]. Throughput counts the measured requests
(and their output tokens) over that window. The hit rate is vLLM's exported token fraction,
prefix-cache hits / queries summed over measured steps. Percentiles are numpy's
`method="linear"` (the default: linear interpolation between closest ranks). KV usage mean is
weighted by step duration. TPOT is vLLM's benchmark's per-request (e2e - TTFT) / (output tokens
- 1), over requests with two or more output tokens. With goodput limits, `goodput_per_s` is the
measured requests meeting them (sim.metrics.goodput) per second of the window. `stable` and its
evidence (`unstable_reason`, `stability_*`, `drain_s`, `drain_fraction`) come from
sim.metrics.stability, over the window from warm-up to the end of arrivals (`duration_s`, else
the last arrival). Floats are rounded to 9
decimals; undefined values (no samples, empty window) are written as null. Keys are sorted, so
identical runs give identical bytes.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.fileio import atomic_write_text
from sim.metrics.goodput import GoodputSlos
from sim.metrics.recorder import NullRecorder
from sim.metrics.records import RequestBatcher, RequestColumns, RequestRecord, StepColumns
from sim.metrics.stability import assess_stability

SummaryValue = float | int | bool | str | None

FLOAT_DECIMALS = 9

# Finished requests are counted this many at a time (and whenever the summary is read).
REQUEST_BATCH = 4096


def percentiles(values: array, qs: tuple[float, ...], *, reorder: bool = False) -> list[float]:
    """Percentiles (0..100) by linear interpolation; NaN for each when there are no values.
    With `reorder`, `values` is partially sorted in place instead of copied first."""
    if len(values) == 0:
        return [math.nan] * len(qs)
    found = np.percentile(np.asarray(values), qs, method="linear", overwrite_input=reorder)
    return [float(p) for p in found]


def json_value(value: SummaryValue) -> SummaryValue:
    """A summary value as JSON holds it: floats rounded, non-finite ones null."""
    if isinstance(value, float):
        return round(value, FLOAT_DECIMALS) if math.isfinite(value) else None
    return value


def rejected_by_cause(summary: Mapping[str, Any]) -> tuple[int, int]:
    """A run's rejected requests by cause: (prompts of at least max_model_len tokens, turned
    away by the front end's queue limits)."""
    num_rejected = int(summary.get("num_rejected") or 0)
    queue_full = int(summary.get("num_rejected_queue_full") or 0)
    return num_rejected - queue_full, queue_full


def rejection_note(summary: Mapping[str, Any]) -> str | None:
    """How many of a run's requests were rejected and why, for every place that shows its
    results (their latencies are in none); None when it rejected none."""
    too_long, queue_full = rejected_by_cause(summary)
    if not too_long and not queue_full:
        return None
    causes = []
    if too_long:
        causes.append(f"{too_long:,} with prompts of at least engine.max_model_len tokens")
    if queue_full:
        causes.append(
            f"{queue_full:,} turned away by the queue limits engine.max_num_queued_reqs / "
            "engine.max_num_queued_tokens"
        )
    num_submitted = int(summary.get("num_submitted") or 0)
    return (
        f"{too_long + queue_full:,} of {num_submitted:,} requests were rejected: "
        f"{'; '.join(causes)}"
    )


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan


def _running_sum(start: float, values: np.ndarray) -> float:
    """start + values[0] + values[1] + ..., added left to right."""
    if not len(values):
        return start
    return float(np.cumsum(np.concatenate(((start,), values)))[-1])


def _sum_in_order(values: Iterable[float]) -> float:
    """0.0 + values[0] + values[1] + ..., added left to right."""
    total = 0.0
    for value in values:
        total += value
    return total


class _StepTimes:
    """One replica's step-time sums, added step by step in its order, as one at a time."""

    __slots__ = ("busy_s", "usage_time_s", "_waiting", "_num_seconds")

    def __init__(self) -> None:
        self.busy_s = 0.0  # measured steps only
        self.usage_time_s = 0.0  # integral of KV usage over measured step time
        self._waiting = np.zeros(0, dtype=np.float64)  # capacity doubles
        self._num_seconds = 0

    @property
    def waiting_time_per_second(self) -> npt.NDArray[np.float64]:
        """Request-seconds spent waiting in each second, up to the last with a queue."""
        return self._waiting[: self._num_seconds]

    def add(self, steps: StepColumns, warmup_s: float) -> None:
        """Add every step's queue and the measured steps' time and usage (np.add.at and
        np.cumsum add element by element, in order)."""
        waiting = steps.num_waiting != 0
        if waiting.any():
            seconds = steps.started_at[waiting].astype(np.int64)
            num_seconds = int(seconds.max()) + 1
            if num_seconds > len(self._waiting):
                grown = np.zeros(max(num_seconds, 2 * len(self._waiting)), dtype=np.float64)
                grown[: len(self._waiting)] = self._waiting
                self._waiting = grown
            self._num_seconds = max(self._num_seconds, num_seconds)
            np.add.at(
                self._waiting, seconds, steps.num_waiting[waiting] * steps.duration_s[waiting]
            )
        measured = steps.started_at >= warmup_s
        if not measured.all():
            steps = steps.select(measured)
        self.busy_s = _running_sum(self.busy_s, steps.duration_s)
        self.usage_time_s = _running_sum(self.usage_time_s, steps.usage * steps.duration_s)


def write_json_atomic(path: Path, document: dict[str, SummaryValue]) -> None:
    """Write sorted-key JSON to `path` atomically (sim.fileio)."""
    atomic_write_text(path, json.dumps(document, sort_keys=True, indent=2, allow_nan=False) + "\n")


class SummaryRecorder(NullRecorder):
    """Accumulates the measured requests and steps; writes summary.json at close.

    Step times are summed per replica, step by step in that replica's order, and the
    replicas' sums added in replica order, so neither batching nor the order in which replicas'
    batches arrive changes them. Memory grows by 8 bytes per measured request latency and per
    inter-token gap.
    """

    def __init__(
        self,
        path: Path,
        *,
        warmup_s: float = 0.0,
        duration_s: float | None = None,
        goodput: GoodputSlos | None = None,
        offload: bool = False,
    ) -> None:
        if not warmup_s >= 0:
            raise InputError(f"warmup_s must be >= 0 seconds, got {warmup_s!r}")
        self.path = Path(path)
        self.warmup_s = warmup_s
        self.duration_s = duration_s  # when arrivals stop; None: at the last arrival
        self.goodput = goodput
        self.num_good_requests = 0
        # With the CPU offload tier: its hits next to the GPU's (keys absent without it).
        self.offload = offload
        self.num_external_queries = 0
        self.num_external_hits = 0
        self.num_host_cached_tokens = 0
        self.num_requests_in_warmup = 0
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.num_computed_prefill_tokens = 0
        self.num_output_tokens = 0
        self.ttfts_s = array("d")
        self.e2es_s = array("d")
        self.queues_s = array("d")
        self.inter_token_latencies_s = array("d")
        self.arrivals_s = array("d")
        self.tpots_s = array("d")
        self.last_arrival_at = 0.0
        self._batcher = RequestBatcher(REQUEST_BATCH)  # finished, not yet counted
        # Request-seconds spent waiting, per second of simulated time (all replicas).
        # Step-time sums per replica, each added step by step in that replica's order and
        # combined in replica order, so the order in which replicas' batches interleave
        # cannot change a bit (sim.metrics.recorder).
        self._step_times: dict[int, _StepTimes] = {}
        self.num_steps = 0
        self.num_queries = 0
        self.num_hits = 0
        self.num_preemptions = 0
        self.num_evictions = 0
        self.usage_max = -math.inf  # stays non-finite (written as null) without steps

    def on_steps(self, steps: StepColumns) -> None:
        """Add the measured steps' counts and usage; every step's queue feeds the stability
        test."""
        for replica, replica_steps in steps.by_replica():
            times = self._step_times.get(replica)
            if times is None:
                times = self._step_times[replica] = _StepTimes()
            times.add(replica_steps, self.warmup_s)
        measured = steps.started_at >= self.warmup_s
        if not measured.all():
            steps = steps.select(measured)
        if not len(steps):
            return
        self.num_steps += len(steps)
        self.num_queries += int(steps.num_queries.sum())
        self.num_hits += int(steps.num_hits.sum())
        self.num_external_queries += int(steps.num_external_queries.sum())
        self.num_external_hits += int(steps.num_external_hits.sum())
        self.num_preemptions += int(steps.num_preemptions.sum())
        self.num_evictions += int(steps.num_evictions.sum())
        self.usage_max = max(self.usage_max, float(steps.usage.max()))

    @property
    def busy_s(self) -> float:
        """Measured step time, all replicas."""
        return _sum_in_order(times.busy_s for _, times in sorted(self._step_times.items()))

    @property
    def usage_time_s(self) -> float:
        """The integral of KV usage over measured step time, all replicas."""
        return _sum_in_order(times.usage_time_s for _, times in sorted(self._step_times.items()))

    @property
    def waiting_time_per_second(self) -> npt.NDArray[np.float64]:
        """Request-seconds spent waiting in each second of simulated time, all replicas."""
        per_replica = [
            times.waiting_time_per_second for _, times in sorted(self._step_times.items())
        ]
        total = np.zeros(max((len(waiting) for waiting in per_replica), default=0))
        for waiting in per_replica:
            total[: len(waiting)] += waiting
        return total

    def on_request_finished(self, request: RequestRecord) -> None:
        """Buffer the request; buffered requests count in bulk (RequestColumns)."""
        if self._batcher.add(request):
            self._count_requests()

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Buffer a batch of requests after those buffered so far; they count in bulk."""
        if self._batcher.add_columns(requests):
            self._count_requests()

    def add_requests(self, requests: RequestColumns) -> None:
        """Count a batch of finished requests, after those buffered one at a time."""
        self._count_requests()
        self._count(requests)

    def _count_requests(self) -> None:
        """Count the buffered requests."""
        requests = self._batcher.take()
        if requests is not None:
            self._count(requests)

    def _count(self, requests: RequestColumns) -> None:
        """Add the requests' latencies and token counts (the measured ones)."""
        if not len(requests):
            return
        self.last_arrival_at = max(self.last_arrival_at, float(requests.arrival_at.max()))
        measured = requests.arrival_at >= self.warmup_s
        self.num_requests_in_warmup += len(requests) - int(measured.sum())
        self.num_prompt_tokens += int(requests.num_prompt_tokens[measured].sum())
        self.num_cached_tokens += int(requests.num_cached_tokens[measured].sum())
        self.num_host_cached_tokens += int(requests.num_host_cached_tokens[measured].sum())
        self.num_computed_prefill_tokens += int(
            requests.num_computed_prefill_tokens[measured].sum()
        )
        self.num_output_tokens += int(requests.num_output_tokens[measured].sum())
        self.ttfts_s.frombytes(requests.ttft_s[measured].tobytes())
        self.e2es_s.frombytes(requests.e2e_s[measured].tobytes())
        self.queues_s.frombytes(requests.queue_s[measured].tobytes())
        self.arrivals_s.frombytes(requests.arrival_at[measured].tobytes())
        if self.goodput is not None:
            self.num_good_requests += int(self.goodput.good(requests)[measured].sum())
        self.tpots_s.frombytes(requests.tpot_s[measured & requests.has_tpot].tobytes())
        gaps = requests.inter_token_latencies_s
        if not measured.all():  # a gap per output token: masked only where needed
            gaps = gaps[np.repeat(measured, requests.num_gaps)]
        self.inter_token_latencies_s.frombytes(gaps.data.cast("B"))

    def summary(self, end_at: float) -> dict[str, SummaryValue]:
        """The summary document for a run that ended at end_at (values not yet rounded)."""
        self._count_requests()
        window_s = end_at - self.warmup_s
        arrivals_end_s = self.duration_s if self.duration_s is not None else self.last_arrival_at
        stability = assess_stability(
            arrivals_s=np.frombuffer(self.arrivals_s, dtype=float),
            ttfts_s=np.frombuffer(self.ttfts_s, dtype=float),
            waiting_time_per_second=self.waiting_time_per_second,
            window_start_s=self.warmup_s,
            window_end_s=arrivals_end_s,
            end_at=end_at,
        )
        # Only the TTFTs pair up with another array (the arrivals, for the stability check);
        # the others may be reordered in place, sparing a copy of every inter-token gap.
        tpot_p50_s, tpot_p99_s = percentiles(self.tpots_s, (50, 99), reorder=True)
        goodput: dict[str, SummaryValue] = {}
        if self.goodput is not None:
            goodput = {
                "goodput_slos": self.goodput.describe(),
                "num_good_requests": self.num_good_requests,
                "goodput_per_s": _ratio(self.num_good_requests, window_s),
            }
        ttft_p50_s, ttft_p90_s, ttft_p99_s = percentiles(self.ttfts_s, (50, 90, 99))
        e2e_p50_s, e2e_p99_s = percentiles(self.e2es_s, (50, 99), reorder=True)
        itl_p50_s, itl_p99_s = percentiles(self.inter_token_latencies_s, (50, 99), reorder=True)
        queue_p50_s, queue_p99_s = percentiles(self.queues_s, (50, 99), reorder=True)
        num_requests = len(self.ttfts_s)
        offload: dict[str, float | int | None] = {}
        if self.offload:
            offload = {
                # vLLM's overall token hit rate: (GPU hits + CPU-tier hits) / GPU queries.
                "hit_rate_gpu_and_cpu": _ratio(
                    self.num_hits + self.num_external_hits, self.num_queries
                ),
                "hit_rate_cpu": _ratio(self.num_external_hits, self.num_queries),
                # The tier over its own queries (vLLM's external_prefix_cache_hits / _queries):
                # defined with GPU prefix caching off too, where the GPU queries are none.
                "external_hit_rate": _ratio(self.num_external_hits, self.num_external_queries),
                "num_external_queries": self.num_external_queries,
                "num_external_hits": self.num_external_hits,
                "num_host_cached_tokens": self.num_host_cached_tokens,
            }
        return {
            **offload,
            "end_at": end_at,
            "e2e_p50_s": e2e_p50_s,
            "e2e_p99_s": e2e_p99_s,
            "hit_rate": _ratio(self.num_hits, self.num_queries),
            "itl_p50_s": itl_p50_s,
            "itl_p99_s": itl_p99_s,
            "kv_usage_max": self.usage_max,
            "kv_usage_mean": _ratio(self.usage_time_s, self.busy_s),
            "num_computed_prefill_tokens": self.num_computed_prefill_tokens,
            "num_evictions": self.num_evictions,
            "num_hits": self.num_hits,
            "num_output_tokens": self.num_output_tokens,
            "num_preemptions": self.num_preemptions,
            "num_prefill_tokens_saved": self.num_cached_tokens,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_queries": self.num_queries,
            "num_requests": num_requests,
            "num_requests_in_warmup": self.num_requests_in_warmup,
            "num_steps": self.num_steps,
            "output_tokens_per_s": _ratio(self.num_output_tokens, window_s),
            "queue_p50_s": queue_p50_s,
            "queue_p99_s": queue_p99_s,
            "requests_per_s": _ratio(num_requests, window_s),
            "ttft_p50_s": ttft_p50_s,
            "ttft_p90_s": ttft_p90_s,
            "ttft_p99_s": ttft_p99_s,
            "tpot_p50_s": tpot_p50_s,
            "tpot_p99_s": tpot_p99_s,
            "warmup_s": self.warmup_s,
            "window_s": window_s,
            **stability.summary_items(),
            **goodput,
        }

    def close(self, end_at: float) -> None:
        """Write summary.json."""
        document = {key: json_value(value) for key, value in self.summary(end_at).items()}
        write_json_atomic(self.path, document)
