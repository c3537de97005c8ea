"""SIGINT and SIGTERM as `Interrupted` (sim/interrupts.py), in this process.

A signal may land while Python runs a finalizer (a generator being closed, a `__del__`), where
any exception is dropped; the interrupt must then be raised again, or the run goes on for hours.
"""

from __future__ import annotations

import os
import signal

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
