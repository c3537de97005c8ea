"""Engine steps on their way to the recorders: gathered in the order the replicas take them and
handed over as StepColumns in batches (when a replica goes idle, every `batch_steps` steps, and
at the end of a run)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from sim.metrics import Recorder, StepColumns, StepRecord
from sim.native import StepColumnsBuffer

DEFAULT_BATCH_STEPS = 4096
_COLUMN_NAMES = tuple(field.name for field in fields(StepColumns))


class StepSink:
    """Collects the steps of one or more replicas; `recorder` gets all of them, and
    `replica_recorders[i]` (when given) the steps of replica i."""

    __slots__ = ("recorder", "replica_recorders", "batch_steps", "buffer", "records")

    def __init__(
        self,
        recorder: Recorder,
        replica_recorders: Sequence[Recorder] | None = None,
        *,
        batch_steps: int = DEFAULT_BATCH_STEPS,
    ) -> None:
        self.recorder = recorder
        self.replica_recorders = replica_recorders
        self.batch_steps = batch_steps
        # The compiled step loops append to the buffer, the Python loop to the records; a
        # run's replicas all use the same loop, so the steps of one run sit in one of them.
        self.buffer = StepColumnsBuffer()
        self.records: list[StepRecord] = []

    def append(self, step: StepRecord) -> None:
        """One step of the Python loop."""
        self.records.append(step)
        if len(self.records) >= self.batch_steps:
            self.flush()

    def flush_if_full(self) -> None:
        """Hand the compiled loops' steps over once a batch is full."""
        if len(self.buffer) >= self.batch_steps:
            self.flush()

    def flush(self) -> None:
        """Hand every step gathered so far to the recorders."""
        if self.records:
            columns = StepColumns.from_records(self.records)
            self.records = []
        elif len(self.buffer):
            columns = _columns_from_buffer(self.buffer.take())
        else:
            return
        self.recorder.on_steps(columns)
        if self.replica_recorders is not None:
            for index, recorder in enumerate(self.replica_recorders):
                recorder.on_steps(_select(columns, columns.replica == index))


def _columns_from_buffer(arrays: dict[str, Any]) -> StepColumns:
    # The CPU-tier counters are 0: the compiled loop runs without a tier.
    zeros = arrays["step_index"] * 0
    return StepColumns(**{name: arrays.get(name, zeros) for name in _COLUMN_NAMES})


def _select(columns: StepColumns, mask: Any) -> StepColumns:
    return StepColumns(**{name: getattr(columns, name)[mask] for name in _COLUMN_NAMES})
