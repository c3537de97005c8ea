"""Recorders the engine calls with simulated time, and the writers of a run's result files."""

from sim.metrics.events import EventsWriter
from sim.metrics.recorder import FanOutRecorder, NullRecorder, Recorder
from sim.metrics.records import BlockEvent, RequestRecord, StepRecord
from sim.metrics.run_recorder import (
    EVENTS_FILE,
    REQUESTS_FILE,
    STEPS_FILE,
    SUMMARY_FILE,
    make_run_recorder,
)
from sim.metrics.scraper import MetricsScraper
from sim.metrics.summary import FLOAT_DECIMALS, SummaryRecorder
from sim.metrics.traces import RequestsWriter, StepsWriter

__all__ = [
    "EVENTS_FILE",
    "FLOAT_DECIMALS",
    "REQUESTS_FILE",
    "STEPS_FILE",
    "SUMMARY_FILE",
    "BlockEvent",
    "EventsWriter",
    "FanOutRecorder",
    "MetricsScraper",
    "NullRecorder",
    "Recorder",
    "RequestRecord",
    "RequestsWriter",
    "StepRecord",
    "StepsWriter",
    "SummaryRecorder",
    "make_run_recorder",
]
