"""Feeding a workload into engines: open-loop arrivals and closed-loop sessions.

The workload is read lazily in order. A spec with `arrival_at` is submitted at that time; a
later turn of a session (`arrival_at` None) is released `think_time_s` after the session's
previous turn finishes. A session's later turns must follow its first turn in the workload,
before the next first turn (an idle session is forgotten when the next first turn is read).
Nothing arriving after `duration_s` is submitted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import simpy

from sim.engine.clock import call_later
from sim.engine.requests import SpecLike
from sim.errors import InputError


@dataclass(slots=True)
class _Session:
    pending: deque[SpecLike] = field(default_factory=deque)
    in_flight: bool = False
    last_finished_at: float = 0.0


class WorkloadDriver:
    """Submits the workload's requests to `dispatch` at their (open or closed loop) times."""

    def __init__(
        self,
        env: simpy.Environment,
        specs: Iterable[SpecLike],
        dispatch: Callable[[SpecLike], None],
        *,
        duration_s: float | None = None,
        on_session_end: Callable[[str], None] | None = None,
    ) -> None:
        self.env = env
        self.dispatch = dispatch
        self.duration_s = duration_s
        self.on_session_end = on_session_end
        self.sessions: dict[str, _Session] = {}
        self._idle_session_ids: list[str] = []
        self.num_submitted = 0
        self._specs: Iterator[SpecLike] = iter(specs)
        self.process = env.process(self._run())

    def _in_window(self, at: float) -> bool:
        return self.duration_s is None or at <= self.duration_s

    def _run(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        last_arrival_at = 0.0
        for spec in self._specs:
            if spec.arrival_at is None:
                self._queue_follow_up(spec)
                continue
            if spec.arrival_at < last_arrival_at:
                raise InputError(
                    f"request {spec.request_id!r} arrives at {spec.arrival_at} s, before the "
                    f"previous arrival at {last_arrival_at} s; arrivals must be in time order"
                )
            last_arrival_at = spec.arrival_at
            if not self._in_window(spec.arrival_at):
                return
            if spec.arrival_at > env.now:
                yield env.timeout(spec.arrival_at - env.now)
            # Every later turn of the sessions seen so far has been read: forget idle ones.
            for session_id in self._idle_session_ids:
                session = self.sessions.get(session_id)
                if session is not None and not session.in_flight and not session.pending:
                    del self.sessions[session_id]
                    if self.on_session_end is not None:
                        self.on_session_end(session_id)
            self._idle_session_ids.clear()
            if spec.session_id is not None:
                session = self.sessions.setdefault(spec.session_id, _Session())
                session.in_flight = True
            self._submit(spec)

    def _submit(self, spec: SpecLike) -> None:
        self.num_submitted += 1
        self.dispatch(spec)

    def _queue_follow_up(self, spec: SpecLike) -> None:
        if spec.session_id is None:
            raise InputError(
                f"request {spec.request_id!r} has neither an arrival time nor a session"
            )
        session = self.sessions.get(spec.session_id)
        if session is None:
            raise InputError(
                f"request {spec.request_id!r} continues session {spec.session_id!r}, which "
                "has no earlier turn in flight; a session's turns must follow its first turn"
            )
        session.pending.append(spec)
        if not session.in_flight and len(session.pending) == 1:
            self._release_next(session, session.last_finished_at)

    def on_session_turn_done(self, session_id: str) -> None:
        """A session's turn finished (or was rejected): release its next turn, or forget it."""
        session = self.sessions.get(session_id)
        if session is None:
            return
        session.in_flight = False
        session.last_finished_at = self.env.now
        if session.pending:
            self._release_next(session, self.env.now)
        else:
            self._idle_session_ids.append(session_id)

    def _release_next(self, session: _Session, finished_at: float) -> None:
        spec = session.pending[0]
        release_at = max(self.env.now, finished_at + spec.think_time_s)
        if not self._in_window(release_at):
            session.pending.clear()
            return
        session.in_flight = True
        call_later(self.env, release_at - self.env.now, self._release, session)

    def _release(self, event: simpy.Event) -> None:
        """The session's next turn is due (the event's value is the session)."""
        session = cast(_Session, event.value)
        self._submit(session.pending.popleft())
