"""The API server in front of the engines: delays each request's hand-off by the front end's
ingress time and records finished requests as the client sees them."""

from __future__ import annotations

from collections.abc import Callable
from math import nan
from typing import TYPE_CHECKING, cast

import simpy

from sim.costmodel import FrontEnd
from sim.engine.clock import call_later
from sim.engine.core import request_record
from sim.engine.requests import SpecLike
from sim.metrics import RequestColumns, RequestRecord
from sim.sched import Request

if TYPE_CHECKING:
    from sim.engine.compiled import CompiledReplicas


class FrontEndStage:
    """Remembers when each request reached the API server; `hand_off` passes it on later.

    Requests reaching the API server at the same instant reach the engine together, when the
    slowest of them is through: the engine drains its input queue before it schedules, so a
    burst that real servers tokenize concurrently is batched, not split by microseconds of
    tokenization.
    """

    __slots__ = (
        "env",
        "frontend",
        "submit",
        "_api_arrivals",
        "_burst",
        "_burst_delay_s",
        "_holder",
    )

    def __init__(
        self,
        env: simpy.Environment,
        frontend: FrontEnd,
        submit: Callable[[SpecLike, float], None],
    ) -> None:
        self.env = env
        self.frontend = frontend
        self.submit = submit  # hands a spec to the engines at the given time
        self._api_arrivals: dict[str, float] = {}
        self._burst: list[SpecLike] = []
        self._burst_delay_s = 0.0  # the slowest ingress of the burst
        self._holder: CompiledReplicas | None = None

    def hold_bursts_in(self, replicas: CompiledReplicas) -> None:
        """Let `replicas` hold the bursts and released turns where it can (its
        `holds_outside_events`): the same events, with the same ids, in C++
        (sim/engine/compiled.py)."""
        self._holder = replicas
        replicas.on_burst_due = self.submit_burst

    def hand_off_at(self, spec: SpecLike, at: float) -> bool:
        """`hand_off` the request at `at`, held in C++ in the place of the event that would
        (the next event id), where the clock is driven from there; False where it is not."""
        holder = self._holder
        if holder is None or not holder.holds_outside_events:
            return False
        holder.release(spec, at, self._reaches_api_server(spec, at))
        return True

    def hand_off(self, spec: SpecLike) -> None:
        """`submit` the request once the API server has tokenized and forwarded it."""
        now = float(self.env.now)
        delay_s = self._reaches_api_server(spec, now)
        if delay_s == 0:
            self.submit(spec, now)
            return
        holder = self._holder
        if holder is not None and holder.holds_outside_events:
            holder.hand_off(spec, delay_s)
            return
        if not self._burst:
            # Runs after every other hand-off of this instant (same-time dispatches come first).
            call_later(self.env, 0, self._close_burst)
            self._burst_delay_s = delay_s
        elif delay_s > self._burst_delay_s:
            self._burst_delay_s = delay_s
        self._burst.append(spec)

    def _reaches_api_server(self, spec: SpecLike, at: float) -> float:
        """The request's ingress time; with one, its arrival at the API server is noted at
        `at` (its record's arrival)."""
        delay_s = self.frontend.ingress_s(spec.num_prompt_tokens)
        if delay_s != 0:
            self._api_arrivals[spec.request_id] = at
        return delay_s

    def _close_burst(self, _event: simpy.Event) -> None:
        burst, self._burst = self._burst, []
        call_later(self.env, self._burst_delay_s, self._submit_burst, burst)

    def _submit_burst(self, event: simpy.Event) -> None:
        self.submit_burst(cast(list[SpecLike], event.value), float(self.env.now))

    def submit_burst(self, burst: list[SpecLike], now: float) -> None:
        """The burst's requests reach the engines at `now`, in hand-off order."""
        submit = self.submit
        for spec in burst:
            submit(spec, now)

    def record(self, request: Request, replica: int) -> RequestRecord:
        """The finished `request`'s record as the client sees it: arrival at the API server,
        tokens received the front end's first-token time after the engine emitted them
        (`columns` does the same for a batch)."""
        return request_record(
            request,
            replica,
            self.frontend.first_token_s,
            self._api_arrivals.pop(request.request_id, None),
        )

    def columns(self, requests: RequestColumns) -> RequestColumns:
        """The engine's records of `requests` as the client sees them, as `record` makes them."""
        api_arrivals = self._api_arrivals
        return requests.through_front_end(
            [api_arrivals.pop(request_id, nan) for request_id in requests.request_id],
            self.frontend.first_token_s,
        )
