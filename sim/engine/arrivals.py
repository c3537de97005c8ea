"""Feeding a workload into engines: open-loop arrivals and closed-loop sessions.

The workload is read lazily in order. A spec with `arrival_at` is submitted at that time; a
later turn of a session (`arrival_at` None) is released `think_time_s` after the session's
previous turn finishes. A session's later turns must follow its first turn in the workload,
before the next first turn (an idle session is forgotten when the next first turn is read).
Nothing arriving after `duration_s` is submitted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import cast

import simpy

from sim.engine.clock import call_at, call_later, call_now_urgent
from sim.engine.requests import SpecLike
from sim.errors import InputError


@dataclass(slots=True)
class _Session:
    pending: deque[SpecLike] = field(default_factory=deque)
    in_flight: bool = False
    last_finished_at: float = 0.0


class WorkloadDriver:
    """Submits the workload's requests to `dispatch` at their (open or closed loop) times.

    The workload is read by callbacks on the clock where a SimPy process reading it would run:
    it starts as a process starts, and each wait for the next arrival is where that process's
    Timeout would be (same time, priority and event id), so every event keeps its order.

    `dispatch_at(spec, at)`, where given, takes a later turn due at `at` in the place of the
    event that would dispatch it (the next event id) and says whether it did; where it does
    not, that event dispatches it.
    """

    def __init__(
        self,
        env: simpy.Environment,
        specs: Iterable[SpecLike],
        dispatch: Callable[[SpecLike], None],
        *,
        duration_s: float | None = None,
        on_session_end: Callable[[str], None] | None = None,
        dispatch_at: Callable[[SpecLike, float], bool] | None = None,
    ) -> None:
        self.env = env
        self.dispatch = dispatch
        self.dispatch_at = dispatch_at
        self.duration_s = duration_s
        self.on_session_end = on_session_end
        self.sessions: dict[str, _Session] = {}
        self._idle_session_ids: list[str] = []
        self.num_submitted = 0
        self._specs: Iterator[SpecLike] = iter(specs)
        self._last_arrival_at = 0.0
        call_now_urgent(env, self._read_on)

    def _in_window(self, at: float) -> bool:
        return self.duration_s is None or at <= self.duration_s

    def _read_on(self, event: simpy.Event) -> None:
        """Submit the arrival now due (the event's value; None at the start), then read the
        workload up to the next arrival in the future and wait for it."""
        due = cast(SpecLike | None, event.value)
        if due is not None:
            self._arrive(due)
        env = self.env
        for spec in self._specs:
            arrival_at = spec.arrival_at
            if arrival_at is None:
                self._queue_follow_up(spec)
                continue
            if arrival_at < self._last_arrival_at:
                raise InputError(
                    f"request {spec.request_id!r} arrives at {arrival_at} s, before the "
                    f"previous arrival at {self._last_arrival_at} s; arrivals must be in time order"
                )
            self._last_arrival_at = arrival_at
            if not self._in_window(arrival_at):
                return
            now = env.now
            if arrival_at > now:
                call_later(env, arrival_at - now, self._read_on, spec)
                return
            self._arrive(spec)

    def _arrive(self, spec: SpecLike) -> None:
        """A first turn (or open-loop request) arrives: forget idle sessions, submit it."""
        # Every later turn of the sessions seen so far has been read: forget idle ones.
        sessions = self.sessions
        for session_id in self._idle_session_ids:
            session = sessions.get(session_id)
            if session is not None and not session.in_flight and not session.pending:
                del sessions[session_id]
                if self.on_session_end is not None:
                    self.on_session_end(session_id)
        self._idle_session_ids.clear()
        if spec.session_id is not None:
            session = sessions.setdefault(spec.session_id, _Session())
            session.in_flight = True
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
        session.last_finished_at = now = self.env.now
        if session.pending:
            self._release_next(session, now)
        else:
            self._idle_session_ids.append(session_id)

    def _release_next(self, session: _Session, finished_at: float) -> None:
        env = self.env
        now = env.now
        release_at = max(now, finished_at + session.pending[0].think_time_s)
        if not self._in_window(release_at):
            session.pending.clear()
            return
        session.in_flight = True
        self.num_submitted += 1
        spec = session.pending.popleft()
        at = now + (release_at - now)  # where a wait of release_at - now ends, as SimPy adds it
        if self.dispatch_at is None or not self.dispatch_at(spec, at):
            call_at(env, at, next(env._eid), self._release, spec)

    def _release(self, event: simpy.Event) -> None:
        """A session's next turn is due (the event's value is its spec)."""
        self.dispatch(cast(SpecLike, event.value))
