"""metrics.parquet: the Prometheus series as a scraper would have seen them, in long form.

Rows are (at, name, replica, le, finished_reason, value): `name` is the sample name as a
/metrics page spells it (counters end in `_total`, histogram rows in `_bucket`, `_sum` or
`_count`), `replica` is the engine (vLLM's `engine` label), `le` the bucket edge ("+Inf" last) on
`_bucket` rows and `finished_reason` the label of `vllm:request_success_total`; both are null
elsewhere. Every replica's series appear in every scrape. Scrapes happen at every positive
multiple of `scrape_interval_s` and once more at `close(end_at)` unless `end_at` is itself a
scrape time. A scrape at time t includes every hook stamped at or before t (steps at
`started_at`, finished requests at `finished_at`); when a hook arrives stamped after one or more
pending scrape times, those scrapes are written first, with the state as it stood then.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pyarrow as pa

from sim.errors import InputError
from sim.metrics.columns import numeric_array, string_array
from sim.metrics.parquet_sink import DEFAULT_BATCH_ROWS, ParquetSink
from sim.metrics.prometheus import PrometheusState
from sim.metrics.recorder import NullRecorder
from sim.metrics.records import RequestRecord, StepRecord

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


class MetricsScraper(NullRecorder):
    """Samples cumulative vLLM-named counters, gauges and histograms on a fixed sim-time grid.

    Every scrape has the same series in the same order, so a scrape is its time and a vector of
    values; the name, replica and label columns repeat the same keys, scrape after scrape.
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
        self.sink = ParquetSink(path, METRICS_SCHEMA, batch_rows=batch_rows)
        keys = self.state.sample_keys()
        self._names = [name for _, (name, _, _) in keys]
        self._replicas = np.array([replica for replica, _ in keys], dtype=np.int64)
        self._les = [le for _, (_, le, _) in keys]
        self._reasons = [reason for _, (_, _, reason) in keys]
        # Scrapes not yet handed to the sink: their times and raw values.
        self._pending_at = array("d")
        self._pending_values: list[list[float]] = []
        # Scrape times are index * interval, not repeated sums, so they do not drift.
        self._next_scrape_index = 1
        self._next_scrape_at = scrape_interval_s
        self._last_scrape_at: float | None = None
        self._last_hook_at = 0.0

    def on_step(self, step: StepRecord) -> None:
        """Write scrapes due before the step starts, then apply it."""
        at = step.started_at
        if at > self._last_hook_at:
            self._last_hook_at = at
            if at > self._next_scrape_at:
                self._scrape_until_before(at)
        self.state.apply_step(step)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Write scrapes due before the request finished, then apply it."""
        self._last_hook_at = max(self._last_hook_at, request.finished_at)
        self._scrape_until_before(request.finished_at)
        self.state.apply_finished_request(request)

    def close(self, end_at: float) -> None:
        """Write the scrapes due up to end_at, a final one at end_at, and finish the file."""
        if end_at < self._last_hook_at:
            raise ValueError(f"close at {end_at} is before the last hook at {self._last_hook_at}")
        while self._next_scrape_at <= end_at:
            self._scrape_next()
        if self._last_scrape_at != end_at:
            self._scrape(end_at)
        self._hand_over()
        self.sink.close()

    def _scrape_until_before(self, at: float) -> None:
        while self._next_scrape_at < at:
            self._scrape_next()

    def _scrape_next(self) -> None:
        self._scrape(self._next_scrape_at)
        self._next_scrape_index += 1
        self._next_scrape_at = self._next_scrape_index * self.scrape_interval_s

    def _scrape(self, at: float) -> None:
        self._pending_at.append(at)
        self._pending_values.append(self.state.raw_values())
        self._last_scrape_at = at
        if len(self._pending_values) * len(self._names) >= self.sink.batch_rows:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give the pending scrapes to the sink as columns."""
        num_scrapes = len(self._pending_at)
        if num_scrapes == 0:
            return
        num_keys = len(self._names)
        at = np.repeat(np.frombuffer(self._pending_at, dtype=np.float64), num_keys)
        scrapes = np.array(self._pending_values, dtype=np.float64)
        self.state.cumulate_buckets(scrapes)
        values = scrapes.ravel()
        self.sink.extend_columns(
            [
                numeric_array(at, pa.float64()),
                string_array(self._names, num_scrapes),
                numeric_array(np.tile(self._replicas, num_scrapes), pa.int64()),
                string_array(self._les, num_scrapes),
                string_array(self._reasons, num_scrapes),
                numeric_array(values, pa.float64()),
            ]
        )
        self._pending_at = array("d")
        self._pending_values = []
