"""Recorders the engine calls with simulated time, and the writers of a run's result files."""

from sim.metrics.events import EventsWriter
from sim.metrics.exposition import prometheus_text
from sim.metrics.goodput import GoodputSlos, parse_goodput
from sim.metrics.recorder import FanOutRecorder, NullRecorder, Recorder, ReplicaRecorders
from sim.metrics.records import BlockEvent, RequestColumns, RequestRecord, StepColumns, StepRecord
from sim.metrics.run_recorder import (
    EVENTS_FILE,
    METRICS_FILE,
    REQUESTS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
    make_run_recorder,
)
from sim.metrics.scraper import MetricsScraper
from sim.metrics.step_buffer import StepBuffer
from sim.metrics.summary import (
    FLOAT_DECIMALS,
    SummaryRecorder,
    json_value,
    rejected_by_cause,
    rejection_note,
)
from sim.metrics.traces import RequestsWriter, StepsWriter

__all__ = [
    "EVENTS_FILE",
    "FLOAT_DECIMALS",
    "METRICS_FILE",
    "REQUESTS_FILE",
    "STEPS_FILE",
    "SUMMARY_FILE",
    "BlockEvent",
    "EventsWriter",
    "FanOutRecorder",
    "GoodputSlos",
    "MetricsScraper",
    "NullRecorder",
    "Recorder",
    "ReplicaRecorders",
    "RequestColumns",
    "RequestRecord",
    "RequestsWriter",
    "StepBuffer",
    "StepColumns",
    "StepRecord",
    "StepsWriter",
    "SummaryRecorder",
    "json_value",
    "rejected_by_cause",
    "rejection_note",
    "make_run_recorder",
    "parse_goodput",
    "prometheus_text",
]
