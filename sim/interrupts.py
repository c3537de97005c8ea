"""SIGINT and SIGTERM as an exception, so an interrupted command cleans up as a failed one does."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A signal asked the process to stop; raised in the main thread at the point it arrived.

    A BaseException, so `except Exception` never swallows it and every cleanup path runs.
    """

    def __init__(self, signal_number: int) -> None:
        # The number is the only argument: SimPy re-raises a process's error as type(e)(*e.args).
        super().__init__(signal_number)
        self.signal_number = signal_number

    def __str__(self) -> str:
        return f"interrupted by {signal.Signals(self.signal_number).name}"

    @property
    def exit_status(self) -> int:
        """128 + the signal number, as a shell reports a process killed by it."""
        return 128 + self.signal_number


def _raise_interrupted(signal_number: int, frame: FrameType | None) -> None:
    # Once is enough: a second Ctrl-C must not break off the cleanup the first one started.
    for handled in HANDLED_SIGNALS:
        signal.signal(handled, signal.SIG_IGN)
    raise Interrupted(signal_number)


_swallowed_signal = [int(signal.SIGTERM)]  # the signal of the Interrupted a finalizer dropped


def _raise_again(signal_number: int, frame: FrameType | None) -> None:
    raise Interrupted(_swallowed_signal[0])


def _deliver_again(unraisable: sys.UnraisableHookArgs) -> None:
    """Python drops an exception raised inside a finalizer (a generator being closed, a
    `__del__`); when that was the Interrupted, raise it again a moment later, elsewhere."""
    if not isinstance(unraisable.exc_value, Interrupted):
        sys.__unraisablehook__(unraisable)
        return
    if threading.current_thread() is threading.main_thread():
        _swallowed_signal[0] = unraisable.exc_value.signal_number
        signal.signal(signal.SIGALRM, _raise_again)
        signal.setitimer(signal.ITIMER_REAL, 0.001)


@contextlib.contextmanager
def signals_raise_interrupted() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise `Interrupted`; the old handlers return after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        handled: signal.getsignal(handled) for handled in (*HANDLED_SIGNALS, signal.SIGALRM)
    }
    previous_hook = sys.unraisablehook
    for handled in HANDLED_SIGNALS:
        signal.signal(handled, _raise_interrupted)
    sys.unraisablehook = _deliver_again
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        if signal.getsignal(signal.SIGALRM) is _raise_again:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for handled, handler in previous.items():
            signal.signal(handled, handler)


def ignore_interrupts() -> None:
    """For worker processes: the parent alone handles Ctrl-C, and stops them itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
