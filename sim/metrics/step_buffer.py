"""Engine steps gathered one at a time and handed to a recorder in batches."""

from __future__ import annotations

from sim.metrics.recorder import Recorder
from sim.metrics.records import StepColumns, StepRecord

# Recorders pay a fixed cost per batch (per replica in it): large batches spread it thin.
DEFAULT_STEP_BATCH = 16384


class StepBuffer:
    """Collects StepRecords and hands them to `recorder.on_steps` as StepColumns, `capacity`
    at a time, and whenever every engine feeding it is idle (so a finished simulation has
    handed over every step). Engines sharing a recorder share its buffer: its batches are
    large even when engines idle one at a time."""

    __slots__ = ("recorder", "capacity", "_records", "_num_engines", "_num_idle")

    def __init__(self, recorder: Recorder, capacity: int = DEFAULT_STEP_BATCH) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.recorder = recorder
        self.capacity = capacity
        self._records: list[StepRecord] = []
        self._num_engines = 0
        self._num_idle = 0

    def attach_engine(self) -> None:
        """Count one more engine feeding the buffer (busy until it says `engine_idle`)."""
        self._num_engines += 1

    def engine_idle(self) -> None:
        """An engine waits for work: flush once every engine does."""
        self._num_idle += 1
        if self._num_idle >= self._num_engines:
            self.flush()

    def engine_busy(self) -> None:
        """An idle engine has work again."""
        self._num_idle -= 1

    def add(self, step: StepRecord) -> None:
        """Buffer one step; hand the batch over when it is full."""
        records = self._records
        records.append(step)
        if len(records) >= self.capacity:
            self.flush()

    def flush(self) -> None:
        """Hand the buffered steps over (nothing when there are none)."""
        if self._records:
            records, self._records = self._records, []
            self.recorder.on_steps(StepColumns.from_records(records))
