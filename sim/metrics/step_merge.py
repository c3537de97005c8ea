"""Several replicas' steps, handed in any cross-replica order, put into one fixed order."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from sim.metrics.records import StepColumns


class StepMerge:
    """Releases steps in (started_at, replica, step_index) order, whatever the order in which
    the replicas' batches arrive; each replica's own steps must arrive in order.

    A step is released once every replica has handed a step that started later (a replica's
    next step cannot start before its last one), so a replica that has not stepped yet, or
    idles, holds the others' steps back until it steps again or `drain`.
    """

    __slots__ = ("_latest", "_pending")

    def __init__(self, num_replicas: int) -> None:
        if num_replicas < 1:
            raise ValueError(f"need at least one replica, got {num_replicas}")
        self._latest = np.full(num_replicas, -math.inf)  # each replica's latest started_at
        self._pending: list[StepColumns] = []

    def add(self, steps: StepColumns) -> StepColumns | None:
        """Take a batch; return the steps now safe to release, in order (None: none)."""
        if not len(steps):
            return None
        if len(self._latest) == 1:
            return steps
        np.maximum.at(self._latest, steps.replica, steps.started_at)
        self._pending.append(steps)
        pending = self._pending[0] if len(self._pending) == 1 else StepColumns.concat(self._pending)
        safe = pending.started_at < self._latest.min()
        if not safe.any():
            self._pending = [pending]
            return None
        if safe.all():
            self._pending = []
            return pending.select(_order(pending))
        self._pending = [pending.select(~safe)]
        released = np.flatnonzero(safe)
        return pending.select(released[_order(pending, released)])

    def drain(self) -> StepColumns | None:
        """Every step still held, in order (None: none)."""
        if not self._pending:
            return None
        pending = StepColumns.concat(self._pending)
        self._pending = []
        return pending.select(_order(pending))


def _order(steps: StepColumns, which: npt.NDArray[np.intp] | None = None) -> npt.NDArray[np.intp]:
    """The order of `steps` (or of the steps at `which`) by (started_at, replica, step_index)."""
    if which is None:
        return np.lexsort((steps.step_index, steps.replica, steps.started_at))
    return np.lexsort((steps.step_index[which], steps.replica[which], steps.started_at[which]))
