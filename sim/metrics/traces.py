"""Per-request and per-step trace files: one parquet row per finished request or engine step.

Column names equal the record's attribute names (ttft_s, e2e_s, queue_s, prefill_s, decode_s,
tpot_s and itl_max_s are its properties). `replica` says which engine replica served the request
or took the step; step indexes count per replica.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from sim.metrics.columns import numeric_array, string_array
from sim.metrics.parquet_sink import DEFAULT_BATCH_ROWS, ParquetSink
from sim.metrics.recorder import NullRecorder
from sim.metrics.records import RequestBatcher, RequestColumns, RequestRecord, StepColumns
from sim.metrics.step_merge import StepMerge

REQUESTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("session_id", pa.string()),
        ("tenant", pa.string()),
        ("arrival_at", pa.float64()),
        ("first_scheduled_at", pa.float64()),
        ("first_token_at", pa.float64()),
        ("finished_at", pa.float64()),
        ("num_prompt_tokens", pa.int64()),
        ("num_cached_tokens", pa.int64()),
        ("num_computed_prefill_tokens", pa.int64()),
        ("num_output_tokens", pa.int64()),
        ("num_preemptions", pa.int64()),
        ("ttft_s", pa.float64()),
        ("e2e_s", pa.float64()),
        ("queue_s", pa.float64()),
        ("frontend_s", pa.float64()),
        ("prefill_s", pa.float64()),
        ("first_decode_s", pa.float64()),
        ("decode_s", pa.float64()),
        ("tpot_s", pa.float64()),
        ("itl_max_s", pa.float64()),
        ("replica", pa.int64()),
        ("num_host_cached_tokens", pa.int64()),
    ]
)

STEPS_SCHEMA = pa.schema(
    [
        ("step_index", pa.int64()),
        ("started_at", pa.float64()),
        ("duration_s", pa.float64()),
        ("num_prefill_tokens", pa.int64()),
        ("num_decode_tokens", pa.int64()),
        ("num_running", pa.int64()),
        ("num_waiting", pa.int64()),
        ("num_free_blocks", pa.int64()),
        ("usage", pa.float64()),
        ("num_preemptions", pa.int64()),
        ("num_queries", pa.int64()),
        ("num_hits", pa.int64()),
        ("num_evictions", pa.int64()),
        ("cached_free_usage", pa.float64()),
        ("replica", pa.int64()),
        ("num_external_queries", pa.int64()),
        ("num_external_hits", pa.int64()),
    ]
)


class RequestsWriter(NullRecorder):
    """Writes requests.parquet, in the order requests finish, a row group of requests at a
    time (RequestColumns)."""

    def __init__(self, path: Path, *, batch_rows: int = DEFAULT_BATCH_ROWS) -> None:
        self.sink = ParquetSink(path, REQUESTS_SCHEMA, batch_rows=batch_rows)
        self._batcher = RequestBatcher(self.sink.batch_rows)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Buffer one row for the request."""
        if self._batcher.add(request):
            self._write()

    def close(self, end_at: float) -> None:
        """Write the buffered rows and finish requests.parquet."""
        self._write()
        self.sink.close()

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Buffer a batch of rows after those buffered so far; a full buffer is written."""
        if self._batcher.add_columns(requests):
            self._write()

    def add_requests(self, requests: RequestColumns) -> None:
        """Buffer a batch of rows, after those buffered one at a time."""
        self._write()
        self._write_columns(requests)

    def _write(self) -> None:
        requests = self._batcher.take()
        if requests is not None:
            self._write_columns(requests)

    def _write_columns(self, requests: RequestColumns) -> None:
        if len(requests):
            self.sink.extend_columns(
                [_request_column(requests, field) for field in REQUESTS_SCHEMA]
            )


def _request_column(requests: RequestColumns, field: pa.Field) -> pa.Array:
    """The arrow array of one requests.parquet column (tpot_s and itl_max_s null for
    requests without one)."""
    if field.type == pa.string():
        return string_array(getattr(requests, field.name))
    nulls = None
    if field.name == "tpot_s":
        nulls = ~requests.has_tpot
    elif field.name == "itl_max_s":
        nulls = requests.num_gaps == 0
    return numeric_array(getattr(requests, field.name), field.type, nulls)


# Step indexes count up by one, start times rise slowly: cheaper and smaller so encoded.
STEPS_ENCODING = {
    "step_index": "DELTA_BINARY_PACKED",
    "started_at": "BYTE_STREAM_SPLIT",
    "duration_s": "BYTE_STREAM_SPLIT",
}


class StepsWriter(NullRecorder):
    """Writes steps.parquet, one row per engine step, in (started_at, replica, step_index)
    order however the replicas' batches interleave (sim.metrics.step_merge)."""

    def __init__(
        self, path: Path, *, num_replicas: int = 1, batch_rows: int = DEFAULT_BATCH_ROWS
    ) -> None:
        self.sink = ParquetSink(
            path,
            STEPS_SCHEMA,
            batch_rows=batch_rows,
            column_encoding=STEPS_ENCODING,
            statistics_columns=("step_index", "started_at"),
        )
        self.merge = StepMerge(num_replicas)

    def on_steps(self, steps: StepColumns) -> None:
        """Append one row per step, once its place in the order is known."""
        self._write(self.merge.add(steps))

    def close(self, end_at: float) -> None:
        """Write the steps still held back and finish steps.parquet."""
        self._write(self.merge.drain())
        self.sink.close()

    def _write(self, steps: StepColumns | None) -> None:
        if steps is not None:
            self.sink.extend_columns(
                [numeric_array(getattr(steps, field.name), field.type) for field in STEPS_SCHEMA]
            )
