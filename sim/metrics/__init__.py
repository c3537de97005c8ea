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
    RUN_FILES,
    STEPS_FILE,
    SUMMARY_FILE,
    make_run_recorder,
)
from sim.metrics.scraper import MetricsScraper
from sim.metrics.stability import MIN_MEASURED_REQUESTS, StabilityRules, ttft_trend
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
    "BlockEvent",
    "EVENTS_FILE",
    "EventsWriter",
    "FLOAT_DECIMALS",
    "FanOutRecorder",
    "GoodputSlos",
    "METRICS_FILE",
    "MIN_MEASURED_REQUESTS",
    "MetricsScraper",
    "NullRecorder",
    "REQUESTS_FILE",
    "RUN_FILES",
    "Recorder",
    "ReplicaRecorders",
    "RequestColumns",
    "RequestRecord",
    "RequestsWriter",
    "STEPS_FILE",
    "StabilityRules",
    "SUMMARY_FILE",
    "StepBuffer",
    "StepColumns",
    "StepRecord",
    "StepsWriter",
    "SummaryRecorder",
    "json_value",
    "make_run_recorder",
    "parse_goodput",
    "prometheus_text",
    "rejected_by_cause",
    "rejection_note",
    "ttft_trend",
]
