"""The recorder interface the engine calls, a do-nothing default, a fan-out and a split by
replica."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sim.metrics.records import BlockEvent, RequestColumns, RequestRecord, StepColumns


class Recorder(Protocol):
    """Hooks called by the engine with simulated time; `close` flushes and finalises outputs.

    Steps come in batches, in the order the engines took them; a recorder's outputs must not
    depend on how they are cut into batches, nor on how `on_steps` calls interleave with the
    other hooks (a batch may come before or after the requests that finished inside it).
    Finished requests come one at a time (`on_request_finished`) or, from the compiled step
    loops, in batches (`on_requests_finished`), in the order they finished either way.
    """

    def on_block_event(self, event: BlockEvent) -> None: ...

    def on_steps(self, steps: StepColumns) -> None: ...

    def on_request_finished(self, request: RequestRecord) -> None: ...

    def on_requests_finished(self, requests: RequestColumns) -> None: ...

    def close(self, end_at: float) -> None: ...


class NullRecorder:
    """Records nothing; the engine's default so hooks never need a None check."""

    def on_block_event(self, event: BlockEvent) -> None:
        """Ignore the event."""

    def on_steps(self, steps: StepColumns) -> None:
        """Ignore the steps."""

    def on_request_finished(self, request: RequestRecord) -> None:
        """Ignore the request."""

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Hand each request to `on_request_finished`, in order (so a recorder taking requests
        one at a time need not know about batches)."""
        for record in requests.records():
            self.on_request_finished(record)

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

    def on_steps(self, steps: StepColumns) -> None:
        """Forward the steps."""
        for recorder in self.recorders:
            recorder.on_steps(steps)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Forward the finished request."""
        for recorder in self.recorders:
            recorder.on_request_finished(request)

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Forward the finished requests."""
        for recorder in self.recorders:
            recorder.on_requests_finished(requests)

    def close(self, end_at: float) -> None:
        """Close every recorder."""
        for recorder in self.recorders:
            recorder.close(end_at)


class ReplicaRecorders:
    """Hands each replica's steps, finished requests and block events to that replica's
    recorder (index = replica)."""

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders: tuple[Recorder, ...] = tuple(recorders)

    def on_block_event(self, event: BlockEvent) -> None:
        """Forward the block event to its replica's recorder."""
        self.recorders[event.replica].on_block_event(event)

    def on_steps(self, steps: StepColumns) -> None:
        """Forward each replica's steps to its recorder."""
        for replica, replica_steps in steps.by_replica():
            self.recorders[replica].on_steps(replica_steps)

    def on_request_finished(self, request: RequestRecord) -> None:
        """Forward the finished request to its replica's recorder."""
        self.recorders[request.replica].on_request_finished(request)

    def on_requests_finished(self, requests: RequestColumns) -> None:
        """Forward each replica's finished requests to its recorder."""
        for replica, replica_requests in requests.by_replica():
            self.recorders[replica].on_requests_finished(replica_requests)

    def close(self, end_at: float) -> None:
        """Close every replica's recorder."""
        for recorder in self.recorders:
            recorder.close(end_at)
