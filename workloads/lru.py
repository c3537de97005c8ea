"""A least-recently-used cache bounded by a total weight (e.g. tokens held), for token reuse."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

Value = TypeVar("Value")


class WeightedLru(Generic[Value]):
    """Keeps the most recently used values whose weights sum to at most `max_weight`."""

    def __init__(self, max_weight: int) -> None:
        self._max_weight = max_weight
        self._entries: OrderedDict[Hashable, tuple[Value, int]] = OrderedDict()
        self._weight = 0

    def get(self, key: Hashable) -> Value | None:
        """The cached value (now most recent), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, value: Value, weight: int) -> None:
        """Store `value`; values heavier than the whole cache are not kept."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._weight -= old[1]
        if weight > self._max_weight:
            return
        self._entries[key] = (value, weight)
        self._weight += weight
        while self._weight > self._max_weight:
            _, (_, evicted_weight) = self._entries.popitem(last=False)
            self._weight -= evicted_weight

    @property
    def total_weight(self) -> int:
        """Sum of the weights now held."""
        return self._weight

    def __len__(self) -> int:
        return len(self._entries)
