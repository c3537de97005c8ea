"""vLLM 0.33's Prometheus metric families (names, types, help, bucket edges) and their state.

The families, their help texts, label names and bucket edges are data read from vLLM 0.33.0's
`PrometheusStatLogger` (`vllm/v1/metrics/loggers.py` and `buckets.py`); the test
`tests/metrics/test_prometheus_export.py` compares them with a /metrics page that real vLLM
0.33.0 served (`tests/fixtures/metrics/`). Each engine replica is one vLLM engine: every series
carries `engine="<replica>"` (and `model_name` when exported). One family is prefixsim's own,
`prefixsim:kv_cache_cached_free_perc`: vLLM counts cached blocks nobody holds as free, so its
usage gauge cannot show a cache full of reusable prefixes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from sim.metrics.exact_sums import CHUNK_VALUES
from sim.metrics.records import RequestColumns, StepColumns

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"

# vLLM's FinishReason values in its order; every one is exported, most stay 0. A simulated
# request ends when it has produced its output tokens, as a request with max_tokens (and
# ignore_eos) ends in vLLM: "length".
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
SIMULATED_FINISHED_REASON = "length"

TTFT_BUCKET_EDGES = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKET_EDGES = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKET_EDGES = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKET_EDGES = (
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
)  # fmt: skip
REQUEST_NUM_PREEMPTIONS_BUCKET_EDGES = (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)


def request_tokens_bucket_edges(max_model_len: int) -> tuple[float, ...]:
    """vLLM's token-count edges: 1, 2, 5, 10, 20, 50, ... up to max_model_len."""
    edges: list[float] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return tuple(edges)
            edges.append(float(mantissa * scale))
        scale *= 10


# eq=False: families are module constants, keyed by identity; hashing three strings on every
# counter update took a third of a step's recording time.
@dataclass(slots=True, frozen=True, eq=False)
class Family:
    """One exported metric family: its base name (as vLLM declares it), type and help text."""

    name: str
    kind: str  # COUNTER, GAUGE or HISTOGRAM
    help: str

    @property
    def sample_name(self) -> str:
        """The name samples carry: counters gain `_total`, as prometheus_client writes them."""
        return f"{self.name}_total" if self.kind == COUNTER else self.name


PREFIX_CACHE_QUERIES = Family(
    "vllm:prefix_cache_queries",
    COUNTER,
    "Prefix cache queries, in terms of number of queried tokens.",
)
PREFIX_CACHE_HITS = Family(
    "vllm:prefix_cache_hits", COUNTER, "Prefix cache hits, in terms of number of cached tokens."
)
NUM_PREEMPTIONS = Family(
    "vllm:num_preemptions", COUNTER, "Cumulative number of preemption from the engine."
)
PROMPT_TOKENS = Family("vllm:prompt_tokens", COUNTER, "Number of prefill tokens processed.")
PROMPT_TOKENS_CACHED = Family(
    "vllm:prompt_tokens_cached",
    COUNTER,
    "Number of cached prompt tokens (local + external).",
)
GENERATION_TOKENS = Family(
    "vllm:generation_tokens", COUNTER, "Number of generation tokens processed."
)
REQUEST_SUCCESS = Family(
    "vllm:request_success", COUNTER, "Count of successfully processed requests."
)
NUM_REQUESTS_RUNNING = Family(
    "vllm:num_requests_running", GAUGE, "Number of requests in model execution batches."
)
NUM_REQUESTS_WAITING = Family(
    "vllm:num_requests_waiting", GAUGE, "Number of requests waiting to be processed."
)
KV_CACHE_USAGE_PERC = Family(
    "vllm:kv_cache_usage_perc", GAUGE, "KV-cache usage. 1 means 100 percent usage."
)
KV_CACHE_CACHED_FREE_PERC = Family(
    "prefixsim:kv_cache_cached_free_perc",
    GAUGE,
    "KV blocks that are free but still hold a cached prefix (evictable); 1 means 100 percent. "
    "vllm:kv_cache_usage_perc counts them as free.",
)
TIME_TO_FIRST_TOKEN_SECONDS = Family(
    "vllm:time_to_first_token_seconds",
    HISTOGRAM,
    "Histogram of time to first token in seconds.",
)
INTER_TOKEN_LATENCY_SECONDS = Family(
    "vllm:inter_token_latency_seconds",
    HISTOGRAM,
    "Histogram of inter-token latency in seconds.",
)
REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS = Family(
    "vllm:request_time_per_output_token_seconds",
    HISTOGRAM,
    "Histogram of time_per_output_token_seconds per request.",
)
E2E_REQUEST_LATENCY_SECONDS = Family(
    "vllm:e2e_request_latency_seconds",
    HISTOGRAM,
    "Histogram of e2e request latency in seconds.",
)
REQUEST_QUEUE_TIME_SECONDS = Family(
    "vllm:request_queue_time_seconds",
    HISTOGRAM,
    "Histogram of time spent in WAITING phase for request.",
)
REQUEST_INFERENCE_TIME_SECONDS = Family(
    "vllm:request_inference_time_seconds",
    HISTOGRAM,
    "Histogram of time spent in RUNNING phase for request.",
)
REQUEST_PREFILL_TIME_SECONDS = Family(
    "vllm:request_prefill_time_seconds",
    HISTOGRAM,
    "Histogram of time spent in PREFILL phase for request.",
)
REQUEST_DECODE_TIME_SECONDS = Family(
    "vllm:request_decode_time_seconds",
    HISTOGRAM,
    "Histogram of time spent in DECODE phase for request.",
)
REQUEST_PROMPT_TOKENS = Family(
    "vllm:request_prompt_tokens", HISTOGRAM, "Number of prefill tokens processed."
)
REQUEST_GENERATION_TOKENS = Family(
    "vllm:request_generation_tokens", HISTOGRAM, "Number of generation tokens processed."
)
REQUEST_PREFILL_KV_COMPUTED_TOKENS = Family(
    "vllm:request_prefill_kv_computed_tokens",
    HISTOGRAM,
    "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
)
REQUEST_NUM_PREEMPTIONS = Family(
    "vllm:request_num_preemptions",
    HISTOGRAM,
    "Histogram of the number of times a request was preempted.",
)
ITERATION_TOKENS_TOTAL = Family(
    "vllm:iteration_tokens_total",
    HISTOGRAM,
    "Histogram of number of tokens per engine_step.",
)

COUNTERS = (
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    NUM_PREEMPTIONS,
    PROMPT_TOKENS,
    PROMPT_TOKENS_CACHED,
    GENERATION_TOKENS,
)
GAUGES = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    KV_CACHE_USAGE_PERC,
    KV_CACHE_CACHED_FREE_PERC,
)
_SIMULATED_REASON = FINISHED_REASONS.index(SIMULATED_FINISHED_REASON)
# Histograms with fixed edges; the token-count ones depend on max_model_len (see below).
FIXED_HISTOGRAM_EDGES = {
    TIME_TO_FIRST_TOKEN_SECONDS: TTFT_BUCKET_EDGES,
    INTER_TOKEN_LATENCY_SECONDS: INTER_TOKEN_LATENCY_BUCKET_EDGES,
    REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS: INTER_TOKEN_LATENCY_BUCKET_EDGES,
    E2E_REQUEST_LATENCY_SECONDS: REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_QUEUE_TIME_SECONDS: REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_INFERENCE_TIME_SECONDS: REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_PREFILL_TIME_SECONDS: REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_DECODE_TIME_SECONDS: REQUEST_LATENCY_BUCKET_EDGES,
    REQUEST_NUM_PREEMPTIONS: REQUEST_NUM_PREEMPTIONS_BUCKET_EDGES,
    ITERATION_TOKENS_TOTAL: ITERATION_TOKENS_BUCKET_EDGES,
}
TOKEN_COUNT_HISTOGRAMS = (
    REQUEST_PROMPT_TOKENS,
    REQUEST_GENERATION_TOKENS,
    REQUEST_PREFILL_KV_COMPUTED_TOKENS,
)
FAMILIES = (
    *COUNTERS,
    REQUEST_SUCCESS,
    *GAUGES,
    *FIXED_HISTOGRAM_EDGES,
    *TOKEN_COUNT_HISTOGRAMS,
)
FAMILY_BY_SAMPLE_NAME = {
    **{family.sample_name: family for family in FAMILIES if family.kind != HISTOGRAM},
    **{
        f"{family.name}{suffix}": family
        for family in FAMILIES
        if family.kind == HISTOGRAM
        for suffix in ("_bucket", "_sum", "_count")
    },
}

INF_LABEL = "+Inf"


def bucket_label(edge: float) -> str:
    """Format an edge as Prometheus' `le` label does for floats: 0.001, 1.0, 2560.0."""
    return repr(float(edge))


# What names one exposition sample: (sample name, le label or None, finished_reason label or None).
SampleKey = tuple[str, str | None, str | None]


def new_counts_by_cut(
    positions: npt.NDArray[np.intp], counted: npt.NDArray[np.intp], width: int
) -> npt.NDArray[np.int64]:
    """Row j: how many of the first counted[j] values (counted ascending) land in each of
    `width` buckets (`positions`): the buckets' growth up to each cut; one row more, last, for
    all the values."""
    num_cuts = len(counted)
    # Each value's index: the first cut counting it, times width, plus its bucket; one
    # per-value array, filled in place.
    segment_sizes = np.diff(counted, prepend=0, append=len(positions))
    index = np.repeat(np.arange(0, (num_cuts + 1) * width, width), segment_sizes)
    index += positions
    counts = np.bincount(index, minlength=(num_cuts + 1) * width)
    return np.cumsum(counts.reshape(num_cuts + 1, width), axis=0)


class Histogram:
    """A Prometheus histogram: a value lands in every bucket whose edge is >= it. Values come
    in batches, each split at cuts into the states a scrape reads."""

    def __init__(self, edges: tuple[float, ...]) -> None:
        self.edges = edges
        self._edges_array = np.asarray(edges, dtype=float)
        self._labels = [bucket_label(edge) for edge in edges]
        self.bucket_counts = np.zeros(len(edges) + 1, dtype=np.int64)  # last: above every edge
        self.total = 0.0
        self.count = 0

    @property
    def width(self) -> int:
        """Entries of `raw_values`: the buckets, sum and count."""
        return len(self.bucket_counts) + 2

    def advance(
        self,
        values: np.ndarray,
        counted: npt.NDArray[np.intp],
        totals: np.ndarray,
        cuts: npt.NDArray[np.intp],
        out: np.ndarray,
    ) -> None:
        """Observe `values`; `out` (one row per cut) gets the `raw_values` of each cut's state.

        Cut j counts the first counted[j] values. The sum grows by `totals` (one per item of the
        stream the cuts count: a value, or a request's values summed exactly), in order: cut j
        has the first cuts[j] of them.
        """
        num_buckets = len(self.bucket_counts)
        # A chunk of values at a time: its bucket positions and per-cut index stay in cache
        # and are reused from the heap. A batch's gaps at once (millions of them) made fresh
        # pages to fault in and zero on every batch, 2 % of the engine bench's hour.
        grown = np.zeros((len(counted) + 1, num_buckets), dtype=np.int64)
        for start in range(0, len(values), CHUNK_VALUES):
            chunk = values[start : start + CHUNK_VALUES]
            positions = np.searchsorted(self._edges_array, chunk, side="left")
            counted_in_chunk = np.clip(counted - start, 0, len(chunk))
            grown += new_counts_by_cut(positions, counted_in_chunk, num_buckets)
        out[:, :num_buckets] = self.bucket_counts + grown[:-1]
        # The sum as one value at a time adds it: left to right (np.cumsum adds in order).
        running = np.cumsum(np.concatenate(((self.total,), totals)))
        out[:, num_buckets] = running[cuts]
        out[:, num_buckets + 1] = self.count + counted
        self.bucket_counts += grown[-1]
        self.total = float(running[-1])
        self.count += len(values)

    def sample_keys(self, name: str) -> list[SampleKey]:
        """The keys of `sample_values`: `_bucket` rows (edges ascending, then +Inf), then
        `_sum` and `_count`."""
        bucket_name = f"{name}_bucket"
        keys: list[SampleKey] = [(bucket_name, label, None) for label in self._labels]
        keys.append((bucket_name, INF_LABEL, None))
        keys.append((f"{name}_sum", None, None))
        keys.append((f"{name}_count", None, None))
        return keys

    def raw_values(self) -> np.ndarray:
        """The state behind `sample_keys`: the count of each bucket alone (the last: above
        every edge), sum and count. Cumulated over the buckets, the counts are the `_bucket`
        samples, the +Inf one included (`cumulate_buckets`)."""
        return np.concatenate((self.bucket_counts, (self.total, self.count)), dtype=np.float64)


# Families whose series the engine's steps feed; finished requests feed the others.
STEP_FAMILIES = frozenset(
    (PREFIX_CACHE_QUERIES, PREFIX_CACHE_HITS, NUM_PREEMPTIONS, *GAUGES, ITERATION_TOKENS_TOTAL)
)
_STEP_COUNTER_FIELDS = ("num_queries", "num_hits", "num_preemptions")  # order of COUNTERS


class StepSeries:
    """One engine's step-fed series: lookup, hit and preemption counters, the gauges (set by
    the latest step) and the iteration-tokens histogram, updated a batch of steps at a time.

    Iteration tokens are the tokens the step scheduled (prefill chunks and decodes). Every
    value is an integer count or a copied step value, so no sum depends on how steps are
    batched.
    """

    def __init__(self) -> None:
        self.counters = np.zeros(len(_STEP_COUNTER_FIELDS), dtype=np.int64)
        self.gauges = np.zeros(len(GAUGES), dtype=np.float64)
        self.iteration_tokens = Histogram(ITERATION_TOKENS_BUCKET_EDGES)

    def values(self) -> np.ndarray:
        """The series in sample-key order: counters, gauges, then the histogram's raw values
        (buckets alone, the last above every edge; sum; count)."""
        return np.concatenate(
            (self.counters, self.gauges, self.iteration_tokens.raw_values()), dtype=np.float64
        )

    def advance(self, steps: StepColumns, cuts: npt.NDArray[np.intp]) -> np.ndarray:
        """Apply `steps` (one engine's, in order); return one row of `values` per cut: the
        state after the first `cuts[j]` of them (cuts ascending)."""
        num_counters, num_gauges = len(self.counters), len(self.gauges)
        rows = np.empty((len(cuts), num_counters + num_gauges + self.iteration_tokens.width))
        counts = np.stack([getattr(steps, name) for name in _STEP_COUNTER_FIELDS], axis=1)
        gauges = np.stack(
            (steps.num_running, steps.num_waiting, steps.usage, steps.cached_free_usage),
            axis=1,
            dtype=np.float64,
        )
        before, taken = cuts - 1, cuts > 0
        rows[:, :num_counters] = self.counters
        rows[taken, :num_counters] += np.cumsum(counts, axis=0)[before[taken]]
        rows[:, num_counters : num_counters + num_gauges] = self.gauges
        rows[taken, num_counters : num_counters + num_gauges] = gauges[before[taken]]
        tokens = steps.num_prefill_tokens + steps.num_decode_tokens
        self.iteration_tokens.advance(
            tokens,
            cuts,
            tokens.astype(np.float64),  # exact: integers far below 2**53
            cuts,
            rows[:, num_counters + num_gauges :],
        )
        if len(steps):
            self.counters += counts.sum(axis=0)
            self.gauges = gauges[-1].copy()
        return rows


# What each request adds to a request-fed histogram (vLLM observes a TPOT of 0 for a request
# with a single output token: RequestColumns.tpot_s is 0 there).
_REQUEST_OBSERVATIONS: dict[Family, Callable[[RequestColumns], np.ndarray]] = {
    TIME_TO_FIRST_TOKEN_SECONDS: attrgetter("ttft_s"),
    E2E_REQUEST_LATENCY_SECONDS: attrgetter("e2e_s"),
    REQUEST_QUEUE_TIME_SECONDS: attrgetter("queue_s"),
    REQUEST_INFERENCE_TIME_SECONDS: attrgetter("inference_s"),
    REQUEST_PREFILL_TIME_SECONDS: attrgetter("engine_prefill_s"),
    REQUEST_DECODE_TIME_SECONDS: attrgetter("decode_s"),
    REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS: attrgetter("tpot_s"),
    REQUEST_NUM_PREEMPTIONS: attrgetter("num_preemptions"),
    REQUEST_PROMPT_TOKENS: attrgetter("num_prompt_tokens"),
    REQUEST_GENERATION_TOKENS: attrgetter("num_output_tokens"),
    REQUEST_PREFILL_KV_COMPUTED_TOKENS: lambda requests: (
        requests.num_prompt_tokens - requests.num_cached_tokens
    ),
}


class RequestSeries:
    """One engine's request-fed series: token counters, request_success, and the request
    histograms, updated a batch of finished requests at a time. vLLM observes TTFT and
    inter-token gaps as tokens appear, but the recorder learns them only at the finish."""

    def __init__(self, max_model_len: int) -> None:
        # Prompt, cached-prompt and generation tokens, in the order of COUNTERS.
        self.counters = np.zeros(3, dtype=np.int64)
        self.success_by_reason = np.zeros(len(FINISHED_REASONS), dtype=np.int64)
        token_edges = request_tokens_bucket_edges(max_model_len)
        self.histograms = {
            **{
                family: Histogram(edges)
                for family, edges in FIXED_HISTOGRAM_EDGES.items()
                if family not in STEP_FAMILIES
            },
            **{family: Histogram(token_edges) for family in TOKEN_COUNT_HISTOGRAMS},
        }

    def values(self) -> np.ndarray:
        """The series in sample-key order (histogram buckets alone, as in StepSeries)."""
        return np.concatenate(
            (
                self.counters,
                self.success_by_reason,
                *(histogram.raw_values() for histogram in self.histograms.values()),
            ),
            dtype=np.float64,
        )

    def advance(self, requests: RequestColumns, cuts: npt.NDArray[np.intp]) -> np.ndarray:
        """Count `requests` (one engine's, in finishing order) and observe their latencies and
        sizes; return one row of `values` per cut: the state after the first `cuts[j]` of them."""
        counts = np.stack(
            (requests.num_prompt_tokens, requests.num_cached_tokens, requests.num_output_tokens),
            axis=1,
        )
        num_counters, num_reasons = len(self.counters), len(self.success_by_reason)
        rows = np.empty((len(cuts), len(self.values())))
        before, taken = cuts - 1, cuts > 0
        rows[:, :num_counters] = self.counters
        rows[taken, :num_counters] += np.cumsum(counts, axis=0)[before[taken]]
        rows[:, num_counters : num_counters + num_reasons] = self.success_by_reason
        rows[:, num_counters + _SIMULATED_REASON] += cuts
        start = num_counters + num_reasons
        for family, histogram in self.histograms.items():
            out = rows[:, start : start + histogram.width]
            if family is INTER_TOKEN_LATENCY_SECONDS:
                # A cut counts every gap of the requests it counts; the sum grows by each
                # request's gaps summed exactly, request by request.
                gap_ends = np.concatenate(((0,), np.cumsum(requests.num_gaps)))
                gaps = requests.inter_token_latencies_s
                histogram.advance(gaps, gap_ends[cuts], requests.gap_sums_s(), cuts, out)
            else:
                values = _REQUEST_OBSERVATIONS[family](requests).astype(np.float64)
                histogram.advance(values, cuts, values, cuts, out)
            start += histogram.width
        self.counters += counts.sum(axis=0)
        self.success_by_reason[_SIMULATED_REASON] += len(requests)
        return rows


def _engine_sample_keys(max_model_len: int) -> list[tuple[SampleKey, bool]]:
    """Every series of one engine in a fixed order (counters, request_success, gauges,
    histograms), each with whether steps feed it."""
    keys: list[tuple[SampleKey, bool]] = [
        ((family.sample_name, None, None), family in STEP_FAMILIES) for family in COUNTERS
    ]
    keys.extend(((REQUEST_SUCCESS.sample_name, None, reason), False) for reason in FINISHED_REASONS)
    keys.extend(((family.sample_name, None, None), True) for family in GAUGES)
    token_edges = request_tokens_bucket_edges(max_model_len)
    histogram_edges = {
        **FIXED_HISTOGRAM_EDGES,
        **{family: token_edges for family in TOKEN_COUNT_HISTOGRAMS},
    }
    for family, edges in histogram_edges.items():
        is_step = family in STEP_FAMILIES
        keys.extend((key, is_step) for key in Histogram(edges).sample_keys(family.name))
    return keys


class PrometheusState:
    """Every engine replica's series: each replica's step-fed and request-fed parts, and where
    their values sit in a scrape (replicas in order, each in `sample_keys` order)."""

    def __init__(self, *, num_replicas: int = 1, max_model_len: int) -> None:
        if num_replicas < 1:
            raise ValueError(f"need at least one replica, got {num_replicas}")
        self.steps = [StepSeries() for _ in range(num_replicas)]
        self.requests = [RequestSeries(max_model_len) for _ in range(num_replicas)]
        engine_keys = _engine_sample_keys(max_model_len)
        self._engine_keys = [key for key, _ in engine_keys]
        width = len(engine_keys)
        step_positions = np.array([i for i, (_, is_step) in enumerate(engine_keys) if is_step])
        request_positions = np.array(
            [i for i, (_, is_step) in enumerate(engine_keys) if not is_step]
        )
        # Columns of each replica's step-fed and request-fed values in a scrape row.
        self.step_columns = [replica * width + step_positions for replica in range(num_replicas)]
        self.request_columns = [
            replica * width + request_positions for replica in range(num_replicas)
        ]
        # (start, length) in a scrape row of every histogram's buckets, all replicas.
        self._bucket_runs: list[tuple[int, int]] = []
        for replica in range(num_replicas):
            index = 0
            while index < width:
                name, label, _ = self._engine_keys[index]
                if label is None:
                    index += 1
                    continue
                length = 0
                while self._engine_keys[index + length][0] == name:
                    length += 1
                self._bucket_runs.append((replica * width + index, length))
                index += length
        self.num_series = width * num_replicas

    def sample_keys(self) -> list[tuple[int, SampleKey]]:
        """(replica, key) of every series of every replica, replicas in order."""
        return [(replica, key) for replica in range(len(self.steps)) for key in self._engine_keys]

    def cumulate_buckets(self, scrapes: np.ndarray) -> None:
        """Turn scrape rows of raw values (histogram buckets counting alone) into the values
        of `sample_keys`, in place: each histogram's buckets summed cumulatively (exact: the
        counts are integers)."""
        for start, length in self._bucket_runs:
            run = scrapes[:, start : start + length]
            np.cumsum(run, axis=1, out=run)
