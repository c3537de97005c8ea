"""The recorder interface the engine calls, a do-nothing default and a fan-out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sim.metrics.records import BlockEvent, RequestRecord, StepColumns, StepRecord


class Recorder(Protocol):
    """Hooks called by the engine with simulated time; `close` flushes and finalises outputs."""

    def on_block_event(self, event: BlockEvent) -> None: ...

    def on_step(self, step: StepRecord) -> None: ...

    def on_steps(self, steps: StepColumns) -> None: ...

    def on_request_finished(self, request: RequestRecord) -> None: ...

    def close(self, end_at: float) -> None: ...


class NullRecorder:
    """Records nothing; the engine's default so hooks never need a None check."""

    def on_block_event(self, event: BlockEvent) -> None:
        """Ignore the event."""

    def on_step(self, step: StepRecord) -> None:
        """Ignore the step."""

    def on_steps(self, steps: StepColumns) -> None:
        """Ignore the steps."""

    def on_request_finished(self, request: RequestRecord) -> None:
        """Ignore the request."""

    def close(self, end_at: float) -> None:
        """Nothing to finalise."""


class FanOutRecorder:
    """Forwards every hook to each recorder, in the order given."""

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders: tuple[Recorder, ...] = tuple(recorders)

    def on_block_event(self, event: BlockEvent) -> None:
        """Forward the block event."""
        for recorder in self.recorders:
            recorder.on_block_event(event)

    def on_step(self, step: StepRecord) -> None:
        """Forward the step."""
        for recorder in self.recorders:
            recorder.on_step(step)

    def on_steps(self, steps: StepColumns) -> None:
        """Forward the steps."""
        for recorder in self.recorders:
            recorder.on_steps(steps)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Forward the finished request."""
        for recorder in self.recorders:
            recorder.on_request_finished(request)

    def close(self, end_at: float) -> None:
        """Close every recorder."""
        for recorder in self.recorders:
            recorder.close(end_at)
