"""The API server in front of the engines: delays each request's hand-off by the front end's
ingress time and restates finished requests as the client sees them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import simpy

from sim.costmodel import FrontEnd
from sim.metrics import BlockEvent, Recorder, RequestRecord, StepColumns

_RECORD_FIELDS = tuple(field.name for field in dataclasses.fields(RequestRecord))
_RECORD_POSITIONS = {name: index for index, name in enumerate(_RECORD_FIELDS)}
_record_values = attrgetter(*_RECORD_FIELDS)


def _replaced(record: RequestRecord, **changes: Any) -> RequestRecord:
    """dataclasses.replace for a RequestRecord at half its cost (one per finished request)."""
    values = list(_record_values(record))
    for name, value in changes.items():
        values[_RECORD_POSITIONS[name]] = value
    return RequestRecord(*values)


class FrontEndStage:
    """Remembers when each request reached the API server; `hand_off` passes it on later.

    Requests reaching the API server at the same instant reach the engine together, when the
    slowest of them is through: the engine drains its input queue before it schedules, so a
    burst that real servers tokenize concurrently is batched, not split by microseconds of
    tokenization.
    """

    __slots__ = ("env", "frontend", "_api_arrivals", "_last_seen", "_last_view", "_burst")

    def __init__(self, env: simpy.Environment, frontend: FrontEnd) -> None:
        self.env = env
        self.frontend = frontend
        self._api_arrivals: dict[str, float] = {}
        # A replica's fan-out hands the same record to the shared and the replica recorder in
        # turn: the second gets the view already made (the arrival was popped by the first).
        self._last_seen: RequestRecord | None = None
        self._last_view: RequestRecord | None = None
        self._burst: list[tuple[float, Callable[[], None]]] = []

    def hand_off(self, request_id: str, num_prompt_tokens: int, submit: Callable[[], None]) -> None:
        """Call `submit` once the API server has tokenized and forwarded the request."""
        delay_s = self.frontend.ingress_s(num_prompt_tokens)
        if delay_s == 0:
            submit()
            return
        self._api_arrivals[request_id] = float(self.env.now)
        if not self._burst:
            # Runs after every other hand-off of this instant (same-time dispatches come first).
            self.env.timeout(0).callbacks.append(self._close_burst)
        self._burst.append((delay_s, submit))

    def _close_burst(self, _event: simpy.Event) -> None:
        burst, self._burst = self._burst, []
        delay_s = max(delay for delay, _submit in burst)

        def submit_all(_event: simpy.Event) -> None:
            for _delay, submit in burst:
                submit()

        self.env.timeout(delay_s).callbacks.append(submit_all)

    def client_view(self, record: RequestRecord) -> RequestRecord:
        """`record` with API-server arrival and tokens timed as the client receives them."""
        if record is self._last_seen and self._last_view is not None:
            return self._last_view
        api_arrival_at = self._api_arrivals.pop(record.request_id, record.arrival_at)
        out_s = self.frontend.first_token_s
        view = _replaced(
            record,
            arrival_at=api_arrival_at,
            first_token_at=record.first_token_at + out_s,
            finished_at=record.finished_at + out_s,
            frontend_in_s=record.arrival_at - api_arrival_at,
            frontend_out_s=out_s,
            prefill_done_at=(
                record.prefill_done_at
                if record.prefill_done_at is not None
                else record.first_token_at
            ),
        )
        self._last_seen, self._last_view = record, view
        return view


class ClientViewRecorder:
    """Forwards every hook to `inner`, finished requests as the client sees them."""

    __slots__ = ("inner", "stage")

    def __init__(self, inner: Recorder, stage: FrontEndStage) -> None:
        self.inner = inner
        self.stage = stage

    def on_block_event(self, event: BlockEvent) -> None:
        self.inner.on_block_event(event)

    def on_steps(self, steps: StepColumns) -> None:
        self.inner.on_steps(steps)

    def on_request_finished(self, request: RequestRecord) -> None:
        self.inner.on_request_finished(self.stage.client_view(request))

    def close(self, end_at: float) -> None:
        self.inner.close(end_at)
