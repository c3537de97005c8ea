"""Engine steps gathered one at a time and handed to a recorder in batches."""

from __future__ import annotations

from sim.metrics.recorder import Recorder
from sim.metrics.records import StepColumns, StepRecord

DEFAULT_STEP_BATCH = 2048


class StepBuffer:
    """Collects StepRecords and hands them to `recorder.on_steps` as StepColumns, `capacity`
    at a time and on `flush`. Engines sharing a recorder share its buffer, so the recorder
    sees every engine's steps in the order they were taken."""

    __slots__ = ("recorder", "capacity", "_records")

    def __init__(self, recorder: Recorder, capacity: int = DEFAULT_STEP_BATCH) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.recorder = recorder
        self.capacity = capacity
        self._records: list[StepRecord] = []

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
