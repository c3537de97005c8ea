"""Engine replicas whose step loop runs in C++ (sim/native/src/step_loop.hpp), on a SimPy clock.

The Python loop (EngineCore._run) is one SimPy process per replica, waking for every step.
Here every wait that process would start is kept in C++ as a wake with the event id SimPy would
have given it, and the wakes run in SimPy's order (time, priority, id) until the first event in
SimPy's own queue is due: an arrival, a session's next turn, the front end's hand-off, or a wake
handed to SimPy earlier. Only then does SimPy get one event, at the earliest pending wake with
that wake's id. So every step, finish, block event and submit happens in the same order, at the
same time, as with the Python loop, and the state any other code reads when its event runs is
the same.

While the clock is driven from here (`run_clock`) and no replica on it runs the Python loop
(which reads SimPy's queue: `env.peek()`), the serving front end's bursts and sessions' next
turns are held in C++ as well (FrontEndStage.hand_off, hand_off_at): a burst's close and
submit, and a turn's release, are events with the ids SimPy would give them, in the same order,
and only the submit comes back to Python.

This needs SimPy's event ids and queue, which SimPy keeps private (`Environment._eid`,
`Environment._queue`, an `Event`'s `_ok` and `_value`); they are read and written here only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from heapq import heappop
from math import inf
from typing import TYPE_CHECKING, Any, cast

import simpy
from simpy.events import NORMAL, URGENT, EventPriority

from sim.engine.clock import call_at
from sim.metrics import RequestColumns, StepBuffer, StepColumns
from sim.native import ClusterLoop, RequestColumnsBuffer, StepColumnsBuffer, StepLoop

if TYPE_CHECKING:
    from sim.engine.core import EngineCore, RecordView

# Why ClusterLoop.run stopped (ClusterStop in step_loop.hpp).
_REACHED = 0  # SimPy's next event is due
_FINISHED = 1  # a finish the caller needs at once
_SUBMIT = 2  # the front end hands a burst to the engines
_FINISHED_LATER = 3  # a finish whose hand-over comes after SimPy's next event
_NO_EVENT = (inf, 0, 0, None)  # SimPy's queue top, read as (at, priority, id, event), when empty


class _EventIds(Iterator[int]):
    """SimPy's event-id counter, made readable and settable: the compiled replicas take ids
    from it exactly when the Python loop's events would."""

    __slots__ = ("next_id",)

    def __init__(self, next_id: int) -> None:
        self.next_id = next_id

    def __next__(self) -> int:
        event_id = self.next_id
        self.next_id = event_id + 1
        return event_id


def _event_ids(env: simpy.Environment) -> _EventIds:
    ids: Any = env._eid
    if not isinstance(ids, _EventIds):
        ids = _EventIds(next(ids))  # skipping one id changes no event's order
        env._eid = ids
    return ids


class CompiledReplicas:
    """The compiled step loops of one clock's replicas (every replica of a Cluster, or one
    EngineCore), run together so that their steps interleave as the replicas' processes do."""

    __slots__ = (
        "env",
        "step_buffer",
        "columns",
        "request_columns",
        "engines",
        "_cluster",
        "_finished",
        "_handed",
        "_ids",
        "_on_step",
        "_record_view",
        "_driving",
        "_next_wake",
        "_python_loops",
        "on_burst_due",
    )

    def __init__(self, env: simpy.Environment, step_buffer: StepBuffer) -> None:
        self.env = env
        self.step_buffer = step_buffer  # its recorder gets the steps, `capacity` at a time
        self.columns = StepColumnsBuffer()  # where the compiled loops write their steps
        # ... and their finished requests' records, as the engine saw them.
        self.request_columns = RequestColumnsBuffer()
        self.engines: dict[int, EngineCore] = {}  # by replica number
        self._cluster = ClusterLoop()
        self._finished: list[tuple[int, Any]] = []
        self._handed: set[int] = set()  # ids of wakes handed to SimPy, not yet due
        self._ids = _event_ids(env)
        # Every replica of a clock reports to the same progress callback: the first one's.
        self._on_step: Callable[[float], None] | None = None
        self._record_view: RecordView  # the first replica's (every replica records alike)
        # While `run_clock` runs the clock, wakes are run from its loop, not handed to SimPy:
        # the earliest pending wake as (at, priority, event id), None when every replica idles.
        self._driving = False
        self._next_wake: tuple[float, int, int] | None = None
        # Where a front-end burst held here goes when due: (its specs, now).
        self.on_burst_due: Callable[[list[Any], float], None] = _no_front_end
        self._python_loops = False  # whether a replica on this clock runs the Python loop

    def add_python_loop(self) -> None:
        """A replica on this clock runs EngineCore's Python loop, which reads SimPy's queue: no
        outside event may be held here, out of its sight."""
        self._python_loops = True

    @property
    def holds_outside_events(self) -> bool:
        """Whether the front end's bursts and sessions' next turns may be held here: the clock
        runs from here (`run_clock`) and no replica reads SimPy's queue."""
        return self._driving and not self._python_loops

    def hand_off(self, spec: Any, ingress_s: float) -> None:
        """A request reached the front end now, `ingress_s` (> 0) before the engines may have
        it: it joins the open burst, held here, or opens one (`holds_outside_events` only)."""
        ids = self._ids
        close_id = ids.next_id
        now = float(self.env.now)
        ids.next_id = self._cluster.hand_off(spec, ingress_s, now, close_id)
        if ids.next_id != close_id:  # a burst opened: its close is held here
            self._held((now, NORMAL, close_id))

    def release(self, spec: Any, at: float, ingress_s: float) -> None:
        """A session's next turn reaches the front end at `at`, held here in the place of the
        event that would hand it off (the next event id; `holds_outside_events` only)."""
        event_id = next(self._ids)
        self._cluster.release(spec, at, event_id, ingress_s)
        self._held((at, NORMAL, event_id))

    def _held(self, key: tuple[float, int, int]) -> None:
        """An event (at, priority, id) is now held here: it may be the next one run_clock runs."""
        wake = self._next_wake
        if wake is None or key < wake:
            self._next_wake = key

    def add(self, engine: EngineCore, loop: StepLoop) -> int:
        """Take on `engine`, whose step loop is `loop`; its index here. It starts now, as the
        Python loop's process would (SimPy's urgent start event)."""
        if not self.engines:
            self._on_step = engine.on_step
            self._record_view = engine.record_view
        self.engines[engine.replica] = engine
        env = self.env
        index = self._cluster.add(loop, float(env.now), next(self._ids), URGENT)
        self._hand_next_wake_to_simpy()
        return index

    def wake(self, index: int) -> None:
        """A request reached replica `index`: an idle replica wakes now (EngineCore.submit)."""
        cluster = self._cluster
        if not cluster.is_idle(index):
            return
        cluster.wake(index, float(self.env.now), next(self._ids))
        self._hand_next_wake_to_simpy()

    def run_clock(self) -> None:
        """Run the clock until no event is left, as `env.run()` does, each wake due before
        SimPy's next event run here instead of as a SimPy event: the same order, without an
        event per wake."""
        env = self.env
        queue = env._queue
        self._driving = True
        self._next_wake = self._cluster.next_wake()
        try:
            while True:
                wake = self._next_wake
                if wake is not None and (not queue or wake < queue[0][:3]):
                    env._now = wake[0]  # where SimPy's event for the wake would set it
                    self._advance()
                    continue
                if not queue:
                    return
                # Environment.step, inline.
                env._now, _, _, event = heappop(queue)
                callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
                for callback in callbacks:
                    callback(event)
                if not event._ok and not hasattr(event, "_defused"):
                    failure = event._value
                    error = type(failure)(*failure.args)
                    error.__cause__ = failure
                    raise error
        finally:
            self._driving = False

    def _on_wake(self, event: simpy.Event) -> None:
        self._handed.discard(event._value)  # the wake's event id
        self._advance()

    def _on_finish(self, _event: simpy.Event) -> None:
        self._hand_over_finished()
        self._advance()

    def _advance(self) -> None:
        """Run every wake due before SimPy's next event."""
        env = self.env
        cluster = self._cluster
        ids = self._ids
        queue = env._queue
        while True:
            cluster.next_event_id = ids.next_id
            # (time, priority, id) of the next event SimPy will fire; time inf when none is left.
            at_top, priority, top_id, _ = queue[0] if queue else _NO_EVENT
            stop, at, event_id, burst = cluster.run(
                env._now, at_top, priority, top_id, self._finished
            )
            ids.next_id = cluster.next_event_id
            if stop == _SUBMIT:
                env._now = at  # the burst's submit event, as SimPy would run it
                self.on_burst_due(cast(list[Any], burst), at)
                continue
            if stop == _FINISHED_LATER:
                # Finishes are handed over at their time, where the replica's process was: as
                # an event (at, NORMAL, event_id), here after SimPy's next event.
                call_at(env, at, event_id, self._on_finish)
                self._next_wake = None  # the loops go on from that event
                return
            if stop == _FINISHED:
                # One due before SimPy's next event would be the next SimPy runs, so it runs
                # here, the clock set as SimPy would set it.
                env._now = at
            if self._finished:
                self._hand_over_finished()
            if stop == _REACHED:
                break
        self._hand_over_steps()
        self._hand_next_wake_to_simpy()

    def _hand_next_wake_to_simpy(self) -> None:
        env = self.env
        cluster = self._cluster
        wake = cluster.next_wake()
        if self._driving:
            self._next_wake = wake
        if wake is None:
            self._flush_records()
            if cluster.last_at > env.now:  # the clock ends where the last step ended
                call_at(env, cluster.last_at, cluster.last_id, _ignore)
            return
        at, priority, event_id = wake
        if not self._driving and event_id not in self._handed:
            self._handed.add(event_id)
            call_at(env, at, event_id, self._on_wake, event_id, EventPriority(priority))

    def _hand_over_finished(self) -> None:
        """Finished requests to their replicas' callbacks, in finishing order (their records
        are in `request_columns`)."""
        finished, self._finished = self._finished, []
        engines = self.engines
        for replica, request in finished:
            on_finished = engines[replica].on_request_finished
            if on_finished is not None:
                on_finished(request)

    def _hand_over_steps(self) -> None:
        """Report progress; a full batch of steps or of finished requests goes to the
        recorder."""
        if self._on_step is not None:
            self._on_step(self._cluster.last_at)
        capacity = self.step_buffer.capacity
        if len(self.columns) >= capacity or len(self.request_columns) >= capacity:
            self._flush_records()

    def _flush_records(self) -> None:
        """Every step and finished request recorded so far to the recorder."""
        recorder = self.step_buffer.recorder
        if len(self.columns):
            recorder.on_steps(_step_columns(self.columns.take()))
        if len(self.request_columns):
            engine_view = RequestColumns.from_engine(self.request_columns.take())
            recorder.on_requests_finished(self._record_view.columns(engine_view))


def _step_columns(arrays: dict[str, Any]) -> StepColumns:
    """StepColumns from the compiled loops' arrays; the CPU-tier counters are 0 (no tier)."""
    zeros = arrays["step_index"] * 0
    return StepColumns(**{name: arrays.get(name, zeros) for name in _STEP_FIELDS})


_STEP_FIELDS = tuple(field.name for field in fields(StepColumns))


def _ignore(_event: simpy.Event) -> None:
    """A wake that only moves the clock."""


def _no_front_end(_burst: list[Any], _now: float) -> None:
    raise RuntimeError("a front-end burst came due, but no front end holds its bursts here")
