"""Cycle-collector settings for the long loops: simulations and trace replays."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between young-generation collections while simulating or replaying. A run allocates
# millions of short-lived containers but almost no reference cycles, so the default (700)
# spends about a fifth of the run walking live objects for nothing; memory stays bounded.
SIMULATION_GC_THRESHOLDS = (200_000, 50, 100)


@contextmanager
def relaxed_garbage_collection() -> Iterator[None]:
    """Collect cycles less often inside the block; the previous thresholds come back after."""
    previous = gc.get_threshold()
    gc.set_threshold(*SIMULATION_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
