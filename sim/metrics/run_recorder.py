"""The standard recorder set for one run: every result file in one output directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from sim.metrics.events import EventsWriter
from sim.metrics.goodput import GoodputSlos
from sim.metrics.recorder import FanOutRecorder, Recorder
from sim.metrics.records import RequestBatcher, RequestColumns, RequestRecord
from sim.metrics.scraper import MetricsScraper
from sim.metrics.summary import SummaryRecorder
from sim.metrics.traces import RequestsWriter, StepsWriter

REQUESTS_FILE = "requests.parquet"
STEPS_FILE = "steps.parquet"
EVENTS_FILE = "events.parquet"
METRICS_FILE = "metrics.parquet"
SUMMARY_FILE = "summary.json"
# What every finished run holds (events.parquet only with outputs.events).
RUN_FILES = (REQUESTS_FILE, STEPS_FILE, METRICS_FILE, SUMMARY_FILE)

# Finished requests reach the request-fed recorders this many at a time.
REQUEST_BATCH = 4096


class RequestBatchRecorder(Recorder, Protocol):
    """A recorder that also counts finished requests a RequestColumns batch at a time."""

    def add_requests(self, requests: RequestColumns) -> None: ...


class RunRecorder(FanOutRecorder):
    """A run's recorders. Finished requests are gathered here and handed to the ones fed by
    requests as one RequestColumns batch, converted once for all of them (none of their files
    depends on how requests are batched)."""

    def __init__(
        self, recorders: Sequence[Recorder], request_recorders: Sequence[RequestBatchRecorder]
    ) -> None:
        super().__init__(recorders)
        self.request_recorders = tuple(request_recorders)
        self._batcher = RequestBatcher(REQUEST_BATCH)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Buffer the request; a full buffer goes to the request-fed recorders."""
        if self._batcher.add(request):
            self._hand_over_requests()

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Buffer the batch, after the requests buffered so far; a full buffer goes to the
        request-fed recorders."""
        if self._batcher.add_columns(requests):
            self._hand_over_requests()

    def close(self, end_at: float) -> None:
        """Hand over the buffered requests, then close every recorder."""
        self._hand_over_requests()
        super().close(end_at)

    def _hand_over_requests(self) -> None:
        requests = self._batcher.take()
        if requests is not None:
            for recorder in self.request_recorders:
                recorder.add_requests(requests)


def make_run_recorder(
    out_dir: Path,
    *,
    max_model_len: int,
    num_replicas: int = 1,
    scrape_interval_s: float = 1.0,
    warmup_s: float = 0.0,
    duration_s: float | None = None,
    events: bool = True,
    goodput: GoodputSlos | None = None,
    offload: bool = False,
) -> Recorder:
    """Build the recorders writing requests, steps, events (unless events=False), metrics,
    summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    requests_writer = RequestsWriter(out_dir / REQUESTS_FILE)
    scraper = MetricsScraper(
        out_dir / METRICS_FILE,
        scrape_interval_s,
        max_model_len=max_model_len,
        num_replicas=num_replicas,
    )
    summary = SummaryRecorder(
        out_dir / SUMMARY_FILE,
        warmup_s=warmup_s,
        duration_s=duration_s,
        goodput=goodput,
        offload=offload,
    )
    recorders: list[Recorder] = [
        requests_writer,
        StepsWriter(out_dir / STEPS_FILE, num_replicas=num_replicas),
    ]
    if events:
        recorders.append(EventsWriter(out_dir / EVENTS_FILE))
    recorders += [scraper, summary]
    return RunRecorder(recorders, [requests_writer, scraper, summary])
