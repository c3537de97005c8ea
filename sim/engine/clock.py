"""Callbacks on SimPy's clock for the per-request paths: the queue entry a Timeout would get
(time, priority, event id), holding an already triggered event whose one callback is given,
without a Timeout's constructor, its scheduling call and a callbacks append per event.

SimPy keeps its queue and event-id counter private (`Environment._queue`, `_eid`, `_now`);
this module and sim/engine/compiled.py are the only places that touch them.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy
from simpy.events import NORMAL, URGENT, EventPriority

Callback = Callable[[simpy.Event], None]

_new_event = simpy.Event.__new__


def call_at(
    env: simpy.Environment,
    at: float,
    event_id: int,
    callback: Callback,
    value: Any = None,
    priority: EventPriority = NORMAL,
) -> None:
    """`callback(event)` at `at` in the place of SimPy's event `event_id`; `event.value` is
    `value`."""
    event = _new_event(simpy.Event)
    event.env = env
    event.callbacks = [callback]
    event._ok = True
    event._value = value
    heappush(env._queue, (at, priority, event_id, event))


def call_later(env: simpy.Environment, delay: float, callback: Callback, value: Any = None) -> None:
    """`callback(event)` where `env.timeout(delay, value)` with that callback would run it: the
    same time (`now + delay`, as SimPy adds it), priority and event id."""
    call_at(env, env._now + delay, next(env._eid), callback, value)


def call_now_urgent(env: simpy.Environment, callback: Callback) -> None:
    """`callback(event)` where a process started now would first run: in the place of its
    start event (now, SimPy's urgent priority, the next event id); `event.value` is None."""
    call_at(env, env._now, next(env._eid), callback, None, URGENT)
