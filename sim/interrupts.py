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


# How often a raised Interrupted is checked to be on its way up. Two checks in a row that find it
# neither propagating nor being handled mean something swallowed it, and it is raised again.
WATCH_INTERVAL_S = 0.2
CHECKS_BEFORE_RAISING_AGAIN = 2

_raised_signal = [0]  # the signal of the Interrupted being watched; 0 while none is
_missed_checks = [0]


def _raise_interrupted(signal_number: int, frame: FrameType | None) -> None:
    # Once is enough: a second Ctrl-C must not break off the cleanup the first one started.
    for handled in HANDLED_SIGNALS:
        signal.signal(handled, signal.SIG_IGN)
    _watch(signal_number, first_check_s=WATCH_INTERVAL_S)
    raise Interrupted(signal_number)


def _watch(signal_number: int, first_check_s: float) -> None:
    _raised_signal[0] = signal_number
    signal.signal(signal.SIGALRM, _check_on_its_way)
    signal.setitimer(signal.ITIMER_REAL, first_check_s, WATCH_INTERVAL_S)


def _interrupted_in_flight() -> bool:
    """Whether an Interrupted is propagating or being handled (cleanup code is running)."""
    exception = sys.exception()
    while exception is not None:
        if isinstance(exception, Interrupted):
            return True
        exception = exception.__context__
    return False


def _check_on_its_way(signal_number: int, frame: FrameType | None) -> None:
    # A signal landing inside an extension module's import, or a finalizer, can have its
    # Interrupted swallowed there; without raising it again the run would go on for hours.
    if _interrupted_in_flight():
        _missed_checks[0] = 0
        return
    _missed_checks[0] += 1
    if _missed_checks[0] >= CHECKS_BEFORE_RAISING_AGAIN:
        _missed_checks[0] = 0
        raise Interrupted(_raised_signal[0])


def _deliver_again(unraisable: sys.UnraisableHookArgs) -> None:
    """Python drops an exception raised inside a finalizer (a generator being closed, a
    `__del__`); when that was the Interrupted, raise it again a moment later, elsewhere."""
    if not isinstance(unraisable.exc_value, Interrupted):
        sys.__unraisablehook__(unraisable)
        return
    if threading.current_thread() is threading.main_thread():
        _missed_checks[0] = CHECKS_BEFORE_RAISING_AGAIN - 1
        _watch(unraisable.exc_value.signal_number, first_check_s=0.001)


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
        if signal.getsignal(signal.SIGALRM) is _check_on_its_way:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _raised_signal[0] = _missed_checks[0] = 0
        for handled, handler in previous.items():
            signal.signal(handled, handler)


def ignore_interrupts() -> None:
    """For worker processes: the parent alone handles Ctrl-C, and stops them itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
