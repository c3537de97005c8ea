"""The standard recorder set for one run: every result file in one output directory."""

from __future__ import annotations

from pathlib import Path

from sim.metrics.events import EventsWriter
from sim.metrics.goodput import GoodputSlos
from sim.metrics.recorder import FanOutRecorder, Recorder
from sim.metrics.scraper import MetricsScraper
from sim.metrics.summary import SummaryRecorder
from sim.metrics.traces import RequestsWriter, StepsWriter

REQUESTS_FILE = "requests.parquet"
STEPS_FILE = "steps.parquet"
EVENTS_FILE = "events.parquet"
METRICS_FILE = "metrics.parquet"
SUMMARY_FILE = "summary.json"


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
    """Build the fan-out writing requests, steps, events (unless events=False), metrics, summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recorders: list[Recorder] = [
        RequestsWriter(out_dir / REQUESTS_FILE),
        StepsWriter(out_dir / STEPS_FILE, num_replicas=num_replicas),
    ]
    if events:
        recorders.append(EventsWriter(out_dir / EVENTS_FILE))
    recorders.append(
        MetricsScraper(
            out_dir / METRICS_FILE,
            scrape_interval_s,
            max_model_len=max_model_len,
            num_replicas=num_replicas,
        )
    )
    recorders.append(
        SummaryRecorder(
            out_dir / SUMMARY_FILE,
            warmup_s=warmup_s,
            duration_s=duration_s,
            goodput=goodput,
            offload=offload,
        )
    )
    return FanOutRecorder(recorders)
