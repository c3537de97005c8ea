"""The API server in front of the engines: delays each request's hand-off by the front end's
ingress time and records finished requests as the client sees them."""

from __future__ import annotations

from collections.abc import Callable

import simpy

from sim.costmodel import FrontEnd
from sim.engine.core import request_record
from sim.metrics import RequestRecord
from sim.sched import Request


class FrontEndStage:
    """Remembers when each request reached the API server; `hand_off` passes it on later.

    Requests reaching the API server at the same instant reach the engine together, when the
    slowest of them is through: the engine drains its input queue before it schedules, so a
    burst that real servers tokenize concurrently is batched, not split by microseconds of
    tokenization.
    """

    __slots__ = ("env", "frontend", "_api_arrivals", "_burst")

    def __init__(self, env: simpy.Environment, frontend: FrontEnd) -> None:
        self.env = env
        self.frontend = frontend
        self._api_arrivals: dict[str, float] = {}
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

    def record(self, request: Request, replica: int) -> RequestRecord:
        """The finished `request`'s record as the client sees it: arrival at the API server,
        tokens received the front end's first-token time after the engine emitted them."""
        return request_record(
            request,
            replica,
            self.frontend.first_token_s,
            self._api_arrivals.pop(request.request_id, None),
        )
