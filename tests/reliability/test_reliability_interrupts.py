"""SIGINT and SIGTERM as `Interrupted` (sim/interrupts.py), in this process.

A signal may land while Python runs a finalizer (a generator being closed, a `__del__`), where
any exception is dropped, or inside code that swallows it (an extension module's import once
did); the interrupt must then be raised again, or the run goes on for hours. A cleanup running
because of it must not be broken off, however long it takes.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from sim.interrupts import Interrupted, signals_raise_interrupted


class SignalsWhenFinalized:
    """Sends `signal_number` to this process from its finalizer."""

    def __init__(self, signal_number: int) -> None:
        self.signal_number = signal_number

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signal_number)
        sum(range(1000))  # the handler runs here, inside the finalizer


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_dropped_by_a_finalizer_is_raised_again(signal_number):
    """The Interrupted raised inside __del__ is dropped by Python; it comes back in the loop
    that follows, with the same signal, and the handlers are restored afterwards."""
    before = {number: signal.getsignal(number) for number in (signal_number, signal.SIGALRM)}
    with pytest.raises(Interrupted) as interrupted, signals_raise_interrupted():
        SignalsWhenFinalized(signal_number)
        for _ in range(10**8):  # about a second: without the second delivery it ends
            pass
    assert interrupted.value.signal_number == signal_number
    assert interrupted.value.exit_status == 128 + signal_number
    assert {number: signal.getsignal(number) for number in before} == before


def test_second_signal_during_cleanup_is_ignored():
    """After the first SIGTERM, a second one does not break off the cleanup it started."""
    cleaned = False
    with pytest.raises(Interrupted), signals_raise_interrupted():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
            cleaned = True
    assert cleaned


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_swallowed_by_an_except_is_raised_again(signal_number):
    """The Interrupted is caught and dropped where it landed (as numpy.random's lazy import once
    did); two watch ticks later (0.4 s) it comes back in the loop that follows."""
    started_at = time.monotonic()
    with pytest.raises(Interrupted) as interrupted, signals_raise_interrupted():
        try:
            os.kill(os.getpid(), signal_number)
            sum(range(1000))
        except BaseException:  # the swallowing this test is about
            pass
        for _ in range(10**8):  # about a second: without the second delivery it ends
            pass
    assert interrupted.value.signal_number == signal_number
    assert time.monotonic() - started_at < 1.0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_long_cleanup_is_not_broken_off_by_the_watch():
    """A cleanup of 1 s (five watch ticks), with an exception of its own caught inside, runs to
    its end; the Interrupted that escapes is the first one, with nothing raised over it."""
    cleaned = False
    with pytest.raises(Interrupted) as interrupted, signals_raise_interrupted():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))
        finally:
            try:
                raise KeyError("cleanup's own error")
            except KeyError:
                time.sleep(0.5)
            time.sleep(0.5)
            cleaned = True
    assert cleaned
    assert interrupted.value.__context__ is None
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
