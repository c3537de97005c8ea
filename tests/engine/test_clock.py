"""sim/engine/clock.py: a callback scheduled with `call_later` runs exactly where SimPy's
Timeout with that callback would: same time, priority and event id, so same order."""

from __future__ import annotations

from collections.abc import Generator

import simpy

from sim.engine.clock import call_later, call_now_urgent


def test_call_later_and_timeouts_interleave_in_creation_order() -> None:
    # At t=1 four waits are started, alternating Timeouts and call_later, two of 0.5 s and two
    # of 0 s, then one 0.5 s Timeout; ties at one instant run in creation order, as SimPy's
    # Timeouts alone would, and each callback sees its value and the clock at its time.
    env = simpy.Environment()
    fired: list[tuple[str, float, object]] = []

    def note(name: str) -> simpy.events.EventCallback:
        return lambda event: fired.append((name, env.now, event.value))

    def start(_event: simpy.Event) -> None:
        env.timeout(0.5, "a").callbacks.append(note("timeout a"))
        call_later(env, 0.5, note("call b"), "b")
        env.timeout(0, "c").callbacks.append(note("timeout c"))
        call_later(env, 0, note("call d"))
        env.timeout(0.5, "e").callbacks.append(note("timeout e"))

    env.timeout(1).callbacks.append(start)
    env.run()

    assert fired == [
        ("timeout c", 1, "c"),
        ("call d", 1, None),
        ("timeout a", 1.5, "a"),
        ("call b", 1.5, "b"),
        ("timeout e", 1.5, "e"),
    ]
    assert env.now == 1.5


def test_call_now_urgent_runs_where_a_process_started_then_would_start() -> None:
    # At t=0: a 0 s Timeout, then a process is started, then call_now_urgent: the process's
    # start and the call (both urgent, in creation order) run before the earlier Timeout.
    env = simpy.Environment()
    fired: list[str] = []
    env.timeout(0).callbacks.append(lambda _event: fired.append("timeout"))

    def process() -> Generator[simpy.Event, None, None]:
        fired.append("process")
        yield env.timeout(0)

    env.process(process())
    call_now_urgent(env, lambda event: fired.append(f"call {event.value}"))
    env.run()

    assert fired == ["process", "call None", "timeout"]
