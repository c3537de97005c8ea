"""metrics.parquet: the Prometheus series as a scraper would have seen them, in long form.

Rows are (at, name, replica, le, finished_reason, value): `name` is the sample name as a
/metrics page spells it (counters end in `_total`, histogram rows in `_bucket`, `_sum` or
`_count`), `replica` is the engine (vLLM's `engine` label), `le` the bucket edge ("+Inf" last) on
`_bucket` rows and `finished_reason` the label of `vllm:request_success_total`; both are null
elsewhere. Every replica's series appear in every scrape. Scrapes happen at every positive
multiple of `scrape_interval_s` and once more at `close(end_at)` unless `end_at` is itself a
scrape time.

A scrape at time t includes every hook stamped at or before t (steps at `started_at`, finished
requests at `finished_at`). Each replica's steps and each replica's finished requests are a
stream of their own, in the order handed: a scrape takes each stream up to its first hook
stamped after t. Steps come in batches, so the file does not depend on how the steps are cut
into batches, nor on how the streams' calls interleave; a scrape is written once every stream
has passed it (or at close).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from sim.errors import InputError
from sim.metrics.columns import numeric_array
from sim.metrics.parquet_sink import DEFAULT_BATCH_ROWS, ParquetSink, repeated_strings
from sim.metrics.prometheus import PrometheusState
from sim.metrics.recorder import NullRecorder
from sim.metrics.records import RequestBatcher, RequestColumns, RequestRecord, StepColumns

METRICS_SCHEMA = pa.schema(
    [
        ("at", pa.float64()),
        ("name", pa.string()),
        ("replica", pa.int64()),
        ("le", pa.string()),
        ("finished_reason", pa.string()),
        ("value", pa.float64()),
    ]
)


class _Stream:
    """One replica's steps or finished requests as the scraper follows them."""

    __slots__ = ("columns", "next_scrape", "last_at")

    def __init__(self, columns: np.ndarray) -> None:
        self.columns = columns  # where its series sit in a scrape row
        self.next_scrape = 1  # the first scrape index it has not passed
        self.last_at = -math.inf  # its latest stamp


# Finished requests wait in a replica's buffer until this many have come, or until they pass
# this many scrapes the stream has not filled, and then count as one batch.
REQUEST_BATCH = 1024
REQUEST_BATCH_SCRAPES = 256


class MetricsScraper(NullRecorder):
    """Samples cumulative vLLM-named counters, gauges and histograms on a fixed sim-time grid.

    Every scrape has the same series in the same order, so a scrape is its time and a vector of
    values; the name, replica and label columns repeat the same keys, scrape after scrape.
    Scrape k (time k * interval) is row k - 1 of the scrapes; close may add one at end_at.
    """

    def __init__(
        self,
        path: Path,
        scrape_interval_s: float,
        *,
        max_model_len: int,
        num_replicas: int = 1,
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> None:
        if not scrape_interval_s > 0:
            raise InputError(f"scrape_interval_s must be > 0 seconds, got {scrape_interval_s!r}")
        self.scrape_interval_s = scrape_interval_s
        self.state = PrometheusState(num_replicas=num_replicas, max_model_len=max_model_len)
        self.sink = ParquetSink(
            path,
            METRICS_SCHEMA,
            batch_rows=batch_rows,
            column_encoding={"value": "BYTE_STREAM_SPLIT"},
            dictionary_columns=("name", "le", "finished_reason"),
            statistics_columns=("at",),  # every row group holds every replica and series
        )
        keys = self.state.sample_keys()
        self._num_keys = len(keys)
        # Scrapes go to the sink about a row group at a time; their name, replica, le and
        # finished_reason columns repeat the keys, so they are built once and sliced.
        self._scrapes_per_chunk = max(1, -(-batch_rows // self._num_keys))
        replicas = np.array([replica for replica, _ in keys], dtype=np.int64)
        self._key_columns = [
            repeated_strings([name for _, (name, _, _) in keys], self._scrapes_per_chunk),
            numeric_array(np.tile(replicas, self._scrapes_per_chunk), pa.int64()),
            repeated_strings([le for _, (_, le, _) in keys], self._scrapes_per_chunk),
            repeated_strings([reason for _, (_, _, reason) in keys], self._scrapes_per_chunk),
        ]
        self._step_streams = [_Stream(columns) for columns in self.state.step_columns]
        self._request_streams = [_Stream(columns) for columns in self.state.request_columns]
        self._request_buffers = [RequestBatcher(REQUEST_BATCH) for _ in range(num_replicas)]
        # A replica's buffer counts once a request finishes after this (scrapes to fill).
        self._request_flush_at = [REQUEST_BATCH_SCRAPES * scrape_interval_s] * num_replicas
        self._streams = self._step_streams + self._request_streams
        # Scrapes some stream has passed but not every one: rows for scrape indexes
        # _first_pending onwards (allocated ahead; _num_pending of them in use).
        self._pending = np.zeros((0, self.state.num_series), dtype=np.float64)
        self._first_pending = 1
        self._num_pending = 0
        self._last_hook_at = 0.0

    def on_steps(self, steps: StepColumns) -> None:
        """Fill the scrapes the steps' replicas pass, then apply the steps."""
        if not len(steps):
            return
        self._last_hook_at = max(self._last_hook_at, float(steps.started_at.max()))
        for replica, replica_steps in steps.by_replica():
            stream = self._step_streams[replica]
            cuts = self._advance(stream, replica_steps.started_at)
            self._fill_passed(stream, self.state.steps[replica].advance(replica_steps, cuts))
        self._hand_over_complete()

    def on_request_finished(self, request: RequestRecord) -> None:
        """Buffer the request; its replica's buffered requests count in bulk (RequestColumns)
        once enough have come, or once they pass enough scrapes."""
        at = request.finished_at
        if at > self._last_hook_at:
            self._last_hook_at = at
        batch_full = self._request_buffers[request.replica].add(request)
        if batch_full or at > self._request_flush_at[request.replica]:
            self._count_requests(request.replica)
            self._hand_over_complete()

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Count a batch of finished requests (`add_requests`)."""
        self.add_requests(requests)

    def add_requests(self, requests: RequestColumns) -> None:
        """Count a batch of finished requests (in finishing order, any replicas), after those
        buffered one at a time."""
        if not len(requests):
            return
        self._last_hook_at = max(self._last_hook_at, float(requests.finished_at.max()))
        for replica, replica_requests in requests.by_replica():
            self._count_requests(replica)
            self._count(replica, replica_requests)
        self._hand_over_complete()

    def _count_requests(self, replica: int) -> None:
        """Count the replica's buffered requests."""
        requests = self._request_buffers[replica].take()
        if requests is not None:
            self._count(replica, requests)

    def _count(self, replica: int, requests: RequestColumns) -> None:
        """Fill the scrapes the replica's requests pass and count them."""
        stream = self._request_streams[replica]
        cuts = self._advance(stream, requests.finished_at)
        self._fill_passed(stream, self.state.requests[replica].advance(requests, cuts))
        self._request_flush_at[replica] = (
            stream.next_scrape + REQUEST_BATCH_SCRAPES
        ) * self.scrape_interval_s

    def close(self, end_at: float) -> None:
        """Write the scrapes due up to end_at, a final one at end_at, and finish the file."""
        if end_at < self._last_hook_at:
            raise ValueError(f"close at {end_at} is before the last hook at {self._last_hook_at}")
        for replica in range(len(self._request_buffers)):
            self._count_requests(replica)
        last_grid = self._last_index_before(end_at)
        if (last_grid + 1) * self.scrape_interval_s <= end_at:
            last_grid += 1
        final_extra = last_grid == 0 or last_grid * self.scrape_interval_s != end_at
        last = last_grid + 1 if final_extra else last_grid
        for replica, stream in enumerate(self._step_streams):
            if last >= stream.next_scrape:
                self._fill(stream, last, self.state.steps[replica].values())
        for replica, stream in enumerate(self._request_streams):
            if last >= stream.next_scrape:
                self._fill(stream, last, self.state.requests[replica].values())
        self._hand_over(self._num_pending, end_at if final_extra else None)
        self.sink.close()

    def _advance(self, stream: _Stream, stamps: np.ndarray) -> npt.NDArray[np.intp]:
        """Move the stream past hooks stamped `stamps` (in its order); return the cuts: for each
        scrape it passes, from next_scrape on, how many of the hooks that scrape includes (a
        scrape takes the stream up to its first hook stamped after the scrape time)."""
        reached = np.maximum(np.maximum.accumulate(stamps), stream.last_at)
        stream.last_at = float(reached[-1])
        last = self._last_index_before(stream.last_at)
        passed = np.arange(stream.next_scrape, max(last + 1, stream.next_scrape))
        return np.searchsorted(reached, passed * self.scrape_interval_s, side="right")

    def _fill_passed(self, stream: _Stream, rows: np.ndarray) -> None:
        """Set the stream's series in the scrapes it passed (one row each, in order)."""
        if len(rows):
            self._fill(stream, stream.next_scrape + len(rows) - 1, rows)

    def _last_index_before(self, at: float) -> int:
        """The largest scrape index k >= 0 with k * interval < at (0: none)."""
        interval = self.scrape_interval_s
        index = max(math.ceil(at / interval) - 1, 0)
        while (index + 1) * interval < at:
            index += 1
        while index > 0 and index * interval >= at:
            index -= 1
        return index

    def _fill(self, stream: _Stream, last: int, values: np.ndarray) -> None:
        """Set the stream's series in scrapes next_scrape..last to `values` (one row, or one
        per scrape) and mark them passed."""
        end = last + 1 - self._first_pending
        if end > len(self._pending):
            grown = np.zeros((max(end, 2 * len(self._pending)), self.state.num_series))
            grown[: self._num_pending] = self._pending[: self._num_pending]
            self._pending = grown
        self._num_pending = max(self._num_pending, end)
        start = stream.next_scrape - self._first_pending
        self._pending[start:end, stream.columns] = values
        stream.next_scrape = last + 1

    def _hand_over_complete(self) -> None:
        """Hand the scrapes every stream has passed to the sink, a sink batch at a time."""
        complete = min(stream.next_scrape for stream in self._streams) - self._first_pending
        if complete * self.state.num_series >= self.sink.batch_rows:
            self._hand_over(complete, None)

    def _hand_over(self, num_scrapes: int, final_at: float | None) -> None:
        """Give the first `num_scrapes` pending scrapes to the sink as columns; the last one
        is at `final_at` when given (the closing scrape), the others on the grid."""
        if num_scrapes == 0:
            return
        num_keys = self._num_keys
        times = np.arange(self._first_pending, self._first_pending + num_scrapes) * (
            self.scrape_interval_s
        )
        if final_at is not None:
            times[-1] = final_at
        scrapes = self._pending[:num_scrapes].copy()
        self.state.cumulate_buckets(scrapes)
        for start in range(0, num_scrapes, self._scrapes_per_chunk):
            chunk = scrapes[start : start + self._scrapes_per_chunk]
            at = np.repeat(times[start : start + len(chunk)], num_keys)
            names, replicas, les, reasons = (
                column.slice(0, chunk.size) for column in self._key_columns
            )
            self.sink.extend_columns(
                [
                    numeric_array(at, pa.float64()),
                    names,
                    replicas,
                    les,
                    reasons,
                    numeric_array(chunk.ravel(), pa.float64()),
                ]
            )
        self._pending = self._pending[num_scrapes:]
        self._num_pending -= num_scrapes
        self._first_pending += num_scrapes
