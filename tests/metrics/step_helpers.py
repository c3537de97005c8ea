"""Steps as the recorders take them: StepColumns from StepRecords."""

from __future__ import annotations

from sim.metrics.records import StepColumns, StepRecord


def steps_of(*steps: StepRecord) -> StepColumns:
    """One batch holding `steps`, in order."""
    return StepColumns.from_records(list(steps))
